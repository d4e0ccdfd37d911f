package web

import (
	"embed"
	"io/fs"
)

// assets are the pages' templates, scripts and styles, compiled into the
// binary: assets/dashboard for the dashboard (/, /tasks/NAME, /static/),
// assets/work for the processor's page (/work, /work/assets/).
//
//go:embed assets
var assets embed.FS

// assetDir is one folder of assets as its own file system.
func assetDir(name string) fs.FS {
	sub, err := fs.Sub(assets, "assets/"+name)
	if err != nil {
		panic(err) // a name of this package's own folders: cannot fail
	}
	return sub
}
