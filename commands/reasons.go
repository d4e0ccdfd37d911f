package commands

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/jsondoc"
)

// The reason-code flags of task create and task update (docs/reasons.md).
func reasonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "reasons", Usage: "reason codes per action, e.g. 'never=duplicate,fraud,withdrawn;return=waiting-docs' (\"off\": none); a disposition's --reason must be one of its action's codes"},
		&cli.StringFlag{Name: "require-reason", Usage: "actions whose dispositions must give a --reason, e.g. never,return (\"off\": none)"},
	}
}

const reasonsHelp = `--reasons declares the reason codes a disposition may give per action
(complete, return, never); --require-reason ACTION[,ACTION] makes one
mandatory for those actions. The database refuses any other code, for
every account (docs/reasons.md). "off" clears either.

   loanq task create review --where "amount > 0" --reasons 'never=duplicate,fraud,withdrawn;return=waiting-docs' --require-reason never,return
   loanq task update review --reasons off --require-reason off`

// reasonChange reads --reasons and --require-reason.
func reasonChange(c *cli.Context) (dispatch.ReasonChange, error) {
	var ch dispatch.ReasonChange
	if c.IsSet("reasons") {
		codes, err := dispatch.ParseReasonCodes(c.String("reasons"))
		if err != nil {
			return ch, err
		}
		ch.Codes = &codes
	}
	if c.IsSet("require-reason") {
		req, err := dispatch.ParseRequireReason(c.String("require-reason"))
		if err != nil {
			return ch, err
		}
		ch.Required = &req
	}
	return ch, nil
}

// reasonsDoc is jsondoc.WithReasons.
var reasonsDoc = jsondoc.WithReasons

// reasonsText is task show's line.
func reasonsText(r dispatch.Reasons) string {
	if r.Empty() {
		return "- (any reason code or none; declare codes with task update --reasons)"
	}
	s := strings.ReplaceAll(r.CodesText(), ";", "; ")
	if len(r.Required) > 0 {
		s += " (required for " + strings.Join(r.Required, ", ") + ")"
	}
	return s
}
