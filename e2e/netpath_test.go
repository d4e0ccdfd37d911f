package e2e

import (
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// netPath is a network path of the test's own: a network namespace joined to
// the host by a veth pair, with a TCP forwarder on the host end that passes
// connections on to a throwaway server. Clients run inside the namespace, so
// cutting or slowing the veth touches only their connections: never the
// loopback interface, never the shared servers' ports. Everything is removed
// in t.Cleanup. It needs root and network namespaces, and nftables for lose
// (this sandbox's kernel has no netem qdisc: delay is added by the forwarder,
// loss by an nftables rule inside the namespace; see docs/reliability.md).
type netPath struct {
	t      *testing.T
	ns     string
	hostIf string
	hostIP string
	nsIP   string
}

func runSystem(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func newNetPath(t *testing.T) *netPath {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the network fault tests need iproute2's `ip` (apt-get install iproute2): %v", err)
	}
	n := rand.IntN(250) + 1
	tag := strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	tag = tag[max(0, len(tag)-4):] + itoa(n)
	p := &netPath{t: t, ns: "loanq-" + tag, hostIf: "lqh" + tag, hostIP: "10.231." + itoa(n) + ".1", nsIP: "10.231." + itoa(n) + ".2"}
	if out, err := exec.Command("ip", "netns", "add", p.ns).CombinedOutput(); err != nil {
		t.Fatalf("creating network namespace %s: %v\n%s\nthe network fault tests need root and network namespaces", p.ns, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.ns).Run() })
	peer := "lqn" + tag
	runSystem(t, "ip", "link", "add", p.hostIf, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", p.hostIf).Run() })
	runSystem(t, "ip", "link", "set", peer, "netns", p.ns)
	runSystem(t, "ip", "addr", "add", p.hostIP+"/30", "dev", p.hostIf)
	runSystem(t, "ip", "link", "set", p.hostIf, "up")
	runSystem(t, "ip", "netns", "exec", p.ns, "ip", "addr", "add", p.nsIP+"/30", "dev", peer)
	runSystem(t, "ip", "netns", "exec", p.ns, "ip", "link", "set", peer, "up")
	runSystem(t, "ip", "netns", "exec", p.ns, "ip", "link", "set", "lo", "up")
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }

// inside runs a command in the namespace (ip netns exec replaces itself with
// the command, so the process id signalled is loanq's).
func (p *netPath) inside(cmd *exec.Cmd) {
	ip, _ := exec.LookPath("ip")
	cmd.Args = append([]string{ip, "netns", "exec", p.ns, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = ip
}

// cut takes the host end of the veth down: the namespace's packets are
// dropped without a FIN or an RST reaching either side.
func (p *netPath) cut() { runSystem(p.t, "ip", "link", "set", p.hostIf, "down") }

// lose drops percent % of the packets leaving and entering the namespace, at
// random (nftables `numgen random`, inside the namespace only): TCP
// retransmits them, as it would over a lossy link.
func (p *netPath) lose(percent int) {
	p.t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		p.t.Fatalf("the packet-loss fault test needs nftables (apt-get install nftables): %v", err)
	}
	rule := "numgen random mod 100 < " + itoa(percent) + " counter drop"
	runSystem(p.t, "ip", "netns", "exec", p.ns, "nft", "add table inet loanq_loss")
	for _, hook := range []string{"input", "output"} {
		runSystem(p.t, "ip", "netns", "exec", p.ns, "nft", "add chain inet loanq_loss "+hook+" { type filter hook "+hook+" priority 0 ; }")
		runSystem(p.t, "ip", "netns", "exec", p.ns, "nft", "add rule inet loanq_loss "+hook+" "+rule)
	}
}

// dropped is how many packets the rules of lose have dropped so far.
func (p *netPath) dropped() int {
	p.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", p.ns, "nft", "list", "table", "inet", "loanq_loss").CombinedOutput()
	if err != nil {
		p.t.Fatalf("reading the packet-loss counters: %v\n%s", err, out)
	}
	n := 0
	f := strings.Fields(string(out))
	for i := 0; i+2 < len(f); i++ {
		if f[i] == "counter" && f[i+1] == "packets" {
			k, err := strconv.Atoi(f[i+2])
			if err != nil {
				p.t.Fatalf("reading the packet-loss counters: %q", out)
			}
			n += k
		}
	}
	return n
}

// restore brings the path back.
func (p *netPath) restore() { runSystem(p.t, "ip", "link", "set", p.hostIf, "up") }

// forward listens on the host end of the path and passes each connection on
// to target (host:port), delaying every chunk by delay in each direction. It
// returns the address clients in the namespace dial.
func (p *netPath) forward(target string, delay time.Duration) string {
	l, err := net.Listen("tcp", p.hostIP+":0")
	if err != nil {
		p.t.Fatalf("forwarder: %v", err)
	}
	var wg sync.WaitGroup
	p.t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); pipe(s, c, delay) }()
			go func() { defer wg.Done(); pipe(c, s, delay) }()
		}
	}()
	return l.Addr().String()
}

// pipe copies src to dst, each chunk delayed by delay (order kept); when src
// ends, both connections are closed.
func pipe(dst, src net.Conn, delay time.Duration) {
	defer dst.Close()
	defer src.Close()
	if delay == 0 {
		_, _ = io.Copy(dst, src)
		return
	}
	type chunk struct {
		at time.Time
		b  []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{time.Now().Add(delay), b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// viaPath rewrites a throwaway server's DSN to go through the forwarder.
func viaPath(dsn, serverAddr, fwdAddr string) string {
	return strings.Replace(dsn, serverAddr, fwdAddr, 1)
}
