SELECT dl.OBJECT_NAME, COALESCE(dl.INDEX_NAME, ''), dl.LOCK_TYPE, dl.LOCK_MODE, dl.LOCK_STATUS, COALESCE(dl.LOCK_DATA, '')
FROM performance_schema.data_locks dl
JOIN performance_schema.threads th ON th.THREAD_ID = dl.THREAD_ID
WHERE th.PROCESSLIST_ID = ?
ORDER BY dl.OBJECT_NAME, dl.INDEX_NAME, dl.LOCK_DATA
