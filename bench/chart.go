package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/loanq/loanq/problem"
)

// A chart is one or more panels sharing one time axis; a panel has a lane per
// worker and a bar per claim (item table) or per request (engine). Each bar
// is drawn in two parts: the wait — from asking until the claim or the answer
// came back, which is where lock waits show — in a light shade, and the work
// and commit after it in the strategy's colour. Lock errors are red ticks.
type panel struct {
	Title    string // first line, bold
	Subtitle string // second line
	Color    string
	IdealMS  float64 // 0: no ideal line
	Lanes    []lane
	Unit     string // what a bar is: "claim" or "request"
}

type lane struct {
	Label  string
	Marks  []Mark
	Errors []float64 // ms of each lock error
}

var strategyColors = map[string]string{"skip": "#2a7ab0", "nowait": "#d08a1c", "wait": "#8e44ad", "lease": "#27916b", "rows": "#16a085"}

func colorOf(strategy string) string {
	if c, ok := strategyColors[strategy]; ok {
		return c
	}
	return "#555555"
}

// checkChartPath refuses a --chart path the run could not write, before
// anything runs: it must end in .svg, and its folder must exist and take a
// new file.
func checkChartPath(path string) error {
	if path == "" {
		return nil
	}
	if !strings.HasSuffix(strings.ToLower(path), ".svg") {
		return problem.Usagef("invalid --chart %q: give a file name ending in .svg", path)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return problem.Usagef("invalid --chart %q: that is a folder; give a file name ending in .svg", path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return problem.Usagef("invalid --chart %q: folder %s does not exist; create it or give another path", path, dir)
	}
	f, err := os.CreateTemp(dir, ".loanq-chart-*")
	if err != nil {
		return problem.Usagef("invalid --chart %q: cannot write in folder %s (%v); give a writable path", path, dir, errText(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// itemPanels turns item-table results into chart panels.
func itemPanels(rs []*Result) []panel {
	var ps []panel
	for _, r := range rs {
		p := panel{Color: colorOf(r.Strategy), IdealMS: float64(r.IdealMS), Unit: "claim",
			Title: fmt.Sprintf("%s on %s — %d workers × %d items × %gms of work, batch %d", r.Strategy, r.serverOrDialect(), r.Workers, r.Rows, r.WorkMS, r.Batch),
			Subtitle: fmt.Sprintf("%d ms (ideal %d ms, ratio %.2f), %.0f items/s, %s, duplicates %d, lock errors %d, deadlocks %d",
				r.ElapsedMS, r.IdealMS, r.Ratio, r.PerSecond, r.lockedText(), r.Duplicates, r.LockErrors, r.Deadlocks)}
		for _, w := range r.PerWorker {
			p.Lanes = append(p.Lanes, lane{Label: fmt.Sprintf("worker %d (%d)", w.Worker, w.Processed), Marks: r.marks[w.Worker], Errors: r.errorsAt[w.Worker]})
		}
		ps = append(ps, p)
	}
	return ps
}

func (r *Result) serverOrDialect() string {
	if r.Server != "" {
		return r.Server
	}
	return r.Dialect
}

// enginePanel draws an engine run: a bar per work get (the wait until it was
// answered, then completing its loans).
func enginePanel(r *EngineResult) panel {
	p := panel{Color: colorOf(r.Strategy), Unit: "request",
		Title: fmt.Sprintf("engine, %s on %s — %d callers × work get --count %d + complete, %d loans", r.Strategy, r.Server, r.Workers, r.Count, r.Rows),
		Subtitle: fmt.Sprintf("%.0f loans/s in %d ms, work get p50 %d ms p99 %d ms, %d criteria runs for %d requests, duplicates %d, raw %s claim %.0f items/s (ratio %.2f)",
			r.LoansPerS, r.ElapsedMS, r.GetP50MS, r.GetP99MS, r.CriteriaRuns, r.Requests, r.Duplicates, r.RawStrategy, r.RawItemsPerS, r.Ratio)}
	for _, w := range r.PerWorker {
		p.Lanes = append(p.Lanes, lane{Label: fmt.Sprintf("caller %d (%d)", w.Worker, w.Loans), Marks: r.marks[w.Worker]})
	}
	return p
}

// niceStep returns a round tick step (1, 2 or 5 × 10^k) giving at most about
// ten ticks over span.
func niceStep(span float64) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

func tickLabel(ms, step float64) string {
	if step >= 1000 {
		return fmt.Sprintf("%gs", math.Round(ms)/1000)
	}
	return fmt.Sprintf("%gms", math.Round(ms*1000)/1000)
}

// writeChart draws the panels on one time scale. The SVG is written by
// hand; every text goes through xml.EscapeText.
func writeChart(path string, ps []panel) error {
	const (
		left, right = 120.0, 24.0
		width       = 1100.0
		lane        = 14.0
		gap         = 2.0
		head        = 46.0
		axis        = 22.0
		panelGap    = 16.0
		legendH     = 26.0
	)
	maxMS := 1.0
	height := 10.0 + legendH
	for _, p := range ps {
		for _, l := range p.Lanes {
			for _, m := range l.Marks {
				maxMS = max(maxMS, m.EndMS)
			}
		}
		maxMS = max(maxMS, p.IdealMS)
		height += head + float64(len(p.Lanes))*(lane+gap) + axis + panelGap
	}
	step := niceStep(maxMS)
	maxMS = math.Ceil(maxMS/step) * step
	plotW := width - left - right
	scale := plotW / maxMS
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="DejaVu Sans, Arial, sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")

	// Legend.
	y := 10.0
	color := "#2a7ab0"
	if len(ps) == 1 {
		color = ps[0].Color
	}
	unit := "claim"
	if len(ps) > 0 {
		unit = ps[0].Unit
	}
	x := left
	legend := func(sw string, text string) {
		b.WriteString(sw)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+18, y+11, esc(text))
		x += 26 + 6.5*float64(len(text))
	}
	waitText := "waiting for the lock / the claim (" + unit + " sent → rows back)"
	if unit == "request" {
		waitText = "work get: asked → answered (lock waits, rechecks)"
	}
	legend(fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="14" height="12" fill="%s" fill-opacity="0.28"/>`, x, y+1, color), waitText)
	workText := "work, finish and commit"
	if unit == "request" {
		workText = "working on and completing the loans"
	}
	legend(fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="14" height="12" fill="%s"/>`, x, y+1, color), workText)
	if unit == "claim" {
		legend(fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d62728" stroke-width="2"/>`, x+7, y, x+7, y+13), "lock error (retried)")
	}
	for _, p := range ps {
		if p.IdealMS > 0 {
			legend(fmt.Sprintf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2" stroke-dasharray="4 2"/>`, x+7, y, x+7, y+13), "ideal: rows × work ÷ workers")
			break
		}
	}
	y += legendH

	for _, p := range ps {
		fmt.Fprintf(&b, `<text x="10" y="%.1f" font-size="13" font-weight="bold">%s</text>`+"\n", y+14, esc(p.Title))
		fmt.Fprintf(&b, `<text x="10" y="%.1f" fill="#333">%s</text>`+"\n", y+31, esc(p.Subtitle))
		y += head
		top := y
		bottom := y + float64(len(p.Lanes))*(lane+gap)
		// Grid first, so the bars cover it.
		for t := 0.0; t <= maxMS+step/2; t += step {
			gx := left + t*scale
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", gx, top, gx, bottom)
		}
		for _, l := range p.Lanes {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+lane-3, esc(l.Label))
			fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="%.0f" fill="#f5f5f5" fill-opacity="0.6"/>`+"\n", left, y, plotW, lane)
			for _, m := range l.Marks {
				mid := m.ClaimedMS
				if mid < m.StartMS || mid > m.EndMS {
					mid = m.StartMS
				}
				x0, x1, x2 := left+m.StartMS*scale, left+mid*scale, left+m.EndMS*scale
				tip := esc(fmt.Sprintf("%s: %d items, asked at %.1f ms, got them at %.1f ms, done at %.1f ms", l.Label, len(m.Items), m.StartMS, mid, m.EndMS))
				if x1-x0 >= 0.3 {
					fmt.Fprintf(&b, `<rect class="wait" x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s" fill-opacity="0.28"><title>%s</title></rect>`+"\n", x0, y, x1-x0, lane, p.Color, tip)
				}
				fmt.Fprintf(&b, `<rect class="work" x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s"><title>%s</title></rect>`+"\n", x1, y+2, max(x2-x1, 0.8), lane-4, p.Color, tip)
			}
			for _, e := range l.Errors {
				ex := left + e*scale
				fmt.Fprintf(&b, `<line class="lock-error" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d62728" stroke-width="1.5"/>`+"\n", ex, y-1, ex, y+lane+1)
			}
			y += lane + gap
		}
		// The ideal above the bars.
		if p.IdealMS > 0 {
			ix := left + p.IdealMS*scale
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2" stroke-dasharray="4 2"/>`+"\n", ix, top-4, ix, bottom+2)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-weight="bold" text-anchor="%s">ideal %s</text>`+"\n", ix+4, top-6, "start", esc(tickLabel(p.IdealMS, 1)))
		}
		// The time axis of the panel, round ticks.
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, y, left+plotW, y)
		for t := 0.0; t <= maxMS+step/2; t += step {
			tx := left + t*scale
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
				tx, y, tx, y+4, tx, y+15, esc(tickLabel(t, step)))
		}
		y += axis + panelGap
	}
	b.WriteString("</svg>\n")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	return nil
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
