package web

import (
	"fmt"
	"time"
)

// The dashboard templates' functions (age, held, ms).

// formatAge prints milliseconds as a short age: 45s, 12m, 3h05m, 2d4h.
func formatAge(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms <= 0:
		return "–"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// formatHeld is formatAge for a duration that may be under a second.
func formatHeld(ms int64) string {
	if ms < 1000 {
		return "<1s"
	}
	return formatAge(ms)
}

// formatMS prints a duration in milliseconds.
func formatMS(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}
