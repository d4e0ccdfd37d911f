package bench

// Inspect hooks for the tests of package bench_test: a run removes its task
// and item table when it ends, so what it left in the database is checked
// from inside, before the clean-up.

func InspectItems(cfg *Config, f func(strategy string)) { cfg.inspect = f }
func InspectEngine(cfg *EngineConfig, f func())         { cfg.inspect = f }
func InspectCLI(cfg *CLIConfig, f func())               { cfg.inspect = f }
