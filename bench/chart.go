package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
)

// writeChart draws every result as a panel of lanes, one per worker, with a
// bar per committed claim from its start to its commit. All panels share one
// time scale, so skip (parallel lanes) and wait (a staircase) compare at a
// glance. The SVG is written by hand; every text goes through xml.EscapeText.
func writeChart(path string, rs []*Result) error {
	const (
		left, right = 90.0, 20.0
		width       = 1000.0
		lane        = 14.0
		gap         = 2.0
		head        = 34.0
		panelGap    = 18.0
	)
	maxMS := 1.0
	height := 10.0
	for _, r := range rs {
		if float64(r.ElapsedMS) > maxMS {
			maxMS = float64(r.ElapsedMS)
		}
		height += head + float64(r.Workers)*(lane+gap) + panelGap
	}
	height += 20 // time axis
	scale := (width - left - right) / maxMS
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	y := 10.0
	colors := map[string]string{"skip": "#2a7ab0", "nowait": "#d08a1c", "wait": "#c0392b", "lease": "#27916b"}
	for _, r := range rs {
		title := fmt.Sprintf("%s on %s: %d workers × %d items × %gms, batch %d — %d ms (ideal %d ms, ratio %.2f), duplicates %d, lock errors %d",
			r.Strategy, r.Dialect, r.Workers, r.Rows, r.WorkMS, r.Batch, r.ElapsedMS, r.IdealMS, r.Ratio, r.Duplicates, r.LockErrors)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="13" font-weight="bold">%s</text>`+"\n", left, y+16, esc(title))
		y += head
		if r.IdealMS > 0 {
			x := left + float64(r.IdealMS)*scale
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="4 3"><title>ideal %d ms</title></line>`+"\n",
				x, y-6, x, y+float64(r.Workers)*(lane+gap), r.IdealMS)
		}
		color := colors[r.Strategy]
		for _, w := range r.PerWorker {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s (%d)</text>`+"\n", left-6, y+lane-3, esc(fmt.Sprintf("worker %d", w.Worker)), w.Processed)
			fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="%.0f" fill="#f2f2f2"/>`+"\n", left, y, width-left-right, lane)
			for _, m := range r.marks[w.Worker] {
				x := left + m.StartMS*scale
				wd := max((m.EndMS-m.StartMS)*scale, 1)
				fmt.Fprintf(&b, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.0f" fill="%s" stroke="white" stroke-width="0.5"><title>%s</title></rect>`+"\n",
					x, y, wd, lane, color, esc(fmt.Sprintf("worker %d: items %v, %.1f–%.1f ms", w.Worker, m.Items, m.StartMS, m.EndMS)))
			}
			y += lane + gap
		}
		y += panelGap
	}
	for i := 0; i <= 10; i++ {
		t := maxMS * float64(i) / 10
		x := left + t*scale
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			x, y-4, x, y, x, y+10, esc(fmt.Sprintf("%.2fs", t/1000)))
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
