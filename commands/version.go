package commands

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/drivers"
)

// Version and BuildDate are stamped by `make build`:
// -ldflags "-X github.com/loanq/loanq/commands.Version=… -X …commands.BuildDate=…".
// Commit is stamped too, for builds where Go records no VCS information
// (-buildvcs=false, a git worktree, or a source tree without .git).
var (
	Version   = "dev"
	BuildDate = ""
	Commit    = ""
)

type versionInfo struct {
	Version    string   `json:"version"`
	Commit     string   `json:"commit"`
	CommitTime string   `json:"committed_at"`
	Modified   bool     `json:"modified"`
	BuildDate  string   `json:"build_date"`
	Go         string   `json:"go"`
	OS         string   `json:"os"`
	Arch       string   `json:"arch"`
	Oracle     bool     `json:"oracle"`
	Databases  []string `json:"databases"`
	Missing    []string `json:"not_compiled_in"`

	// module is the module version a `go install …@vX.Y.Z` built from the
	// module download ("" for a build from a source tree).
	module string
}

// buildInfo reads the version from -ldflags and the commit from the Go build
// information (go build records vcs.revision and vcs.time in a checkout).
func buildInfo() versionInfo {
	v := versionInfo{Version: Version, BuildDate: BuildDate, Commit: Commit, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Databases: []string{}, Missing: []string{}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.module = bi.Main.Version // go install …@vX.Y.Z
			if v.Version == "dev" {
				v.Version = bi.Main.Version
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	for _, name := range drivers.Names() {
		d, _ := drivers.ByName(name)
		if why := d.Unsupported(); why != "" {
			v.Missing = append(v.Missing, name+": "+why)
			continue
		}
		v.Databases = append(v.Databases, name)
		// "oracle" says whether the one driver that depends on how loanq
		// was built (Oracle needs cgo: Unsupported above) is compiled in.
		if name == "oracle" {
			v.Oracle = true
		}
	}
	return v
}

func (v versionInfo) text(w io.Writer) {
	fmt.Fprintf(w, "loanq %s\n", v.Version)
	fmt.Fprintf(w, "commit:     %s\n", v.commitText())
	if v.CommitTime != "" {
		fmt.Fprintf(w, "committed:  %s\n", v.CommitTime)
	}
	if v.BuildDate != "" {
		fmt.Fprintf(w, "built:      %s\n", v.BuildDate)
	}
	fmt.Fprintf(w, "go:         %s %s/%s\n", v.Go, v.OS, v.Arch)
	fmt.Fprintf(w, "databases:  %s\n", strings.Join(v.Databases, ", "))
	for _, m := range v.Missing {
		fmt.Fprintf(w, "not compiled in: %s\n", m)
	}
}

// commitText is the commit line. Go's build information cannot tell why it
// holds no commit: -buildvcs=false (GOFLAGS) and a source tree without
// .git, or a git worktree (whose .git is a file Go does not follow), all
// leave the same empty record. So an unknown commit says what is certain
// (the build was not stamped) and the cure (`make build` stamps the commit
// itself, from git); only a build from a module download (go install
// …@vX.Y.Z) is known to have had no checkout at all.
func (v versionInfo) commitText() string {
	switch {
	case v.Commit != "" && v.Modified:
		return v.Commit + " (with uncommitted changes)"
	case v.Commit != "":
		return v.Commit
	case v.module != "":
		return "unknown (installed as module version " + v.module + ", not built from a git checkout)"
	default:
		return "unknown (built without VCS stamping; use make build)"
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the version, commit, build date, Go version and the databases compiled in",
		ArgsUsage: " ",
		Description: `Also ` + "`loanq --version`" + `. With --output json, one document (docs/json.md).

Example:
   loanq version
   loanq -o json version`,
		Action: func(c *cli.Context) error {
			if _, err := args(c); err != nil {
				return err
			}
			v := buildInfo()
			return emit(c, v, v.text)
		},
	}
}

func init() {
	cli.VersionPrinter = func(c *cli.Context) { buildInfo().text(c.App.Writer) }
}
