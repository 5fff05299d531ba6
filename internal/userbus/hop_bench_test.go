package userbus

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// BenchmarkRoundTrip times one call to the user manager (a unit's
// InvocationID property, as a launch reads it) on the connection mosaic
// dials, the manager's private socket, against the same call on the user
// bus through dbus-daemon, alternating (x-vs-bus).
func BenchmarkRoundTrip(b *testing.B) {
	sandboxtest.Require(b)
	rt, err := xdg.RuntimeDir()
	if err != nil {
		b.Fatal(err)
	}
	ours, viaBus := New(""), New("unix:path="+filepath.Join(rt, "bus"))
	b.Cleanup(ours.Close)
	b.Cleanup(viaBus.Close)
	ctx := context.Background()
	call := func(bus *Bus) time.Duration {
		t := time.Now()
		if err := bus.Do(ctx, func(c *sddbus.Conn) error {
			_, err := c.GetUnitPropertyContext(ctx, "default.target", "InvocationID")
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return time.Since(t)
	}
	call(ours)
	call(viaBus)
	var a, d time.Duration
	for b.Loop() {
		a += call(ours)
		d += call(viaBus)
	}
	b.ReportMetric(float64(a.Nanoseconds())/float64(b.N), "ns/call")
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "ns/bus-call")
	b.ReportMetric(float64(a)/float64(d), "x-vs-bus")
}
