// loadgen: a keep-alive HTTPS load generator for the webhook benchmark, in Go so that the client costs the
// 2-core machine little next to the server it measures.
//
// Closed loop (-rate 0): each of -connections sends as soon as its previous answer arrives.
// Open loop (-rate N): request i is due at start + i/N; latency counts from that due time, so a server
// that falls behind shows its queueing instead of slowing the client down (no coordinated omission).
// Prints one JSON object: requests, errors, seconds, rate, p50/p99/p999 in milliseconds. With -token and
// -expect it drives the API server itself (Pod creates through admission: bench/peers.py).
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "base URL, e.g. https://localhost:8443")
	path := flag.String("path", "/validate", "request path")
	caFile := flag.String("ca", "", "CA certificate (PEM) that signed the server's certificate")
	bodiesFile := flag.String("bodies", "", "file with one request body per line")
	duration := flag.Duration("duration", 5*time.Second, "how long to send")
	connections := flag.Int("connections", 4, "concurrent keep-alive connections")
	rate := flag.Float64("rate", 0, "requests per second (0: as fast as answered)")
	token := flag.String("token", "", "bearer token (for the API server)")
	expect := flag.Int("expect", 0, "the status code of a good answer (0: a webhook's 200 with \"allowed\")")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	check(err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		check(fmt.Errorf("no certificate in %s", *caFile))
	}
	bodies := readBodies(*bodiesFile)
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: *connections,
		MaxConnsPerHost:     *connections,
		ForceAttemptHTTP2:   false,
	}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	target := *url + *path

	send := func(i int) bool {
		req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(bodies[i%len(bodies)]))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		if *token != "" {
			req.Header.Set("Authorization", "Bearer "+*token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if *expect != 0 {
			return err == nil && resp.StatusCode == *expect
		}
		return err == nil && resp.StatusCode == 200 && bytes.Contains(data, []byte(`"allowed"`))
	}

	var mu sync.Mutex
	var latencies []float64
	errors := 0
	record := func(began time.Time, ok bool) {
		ms := float64(time.Since(began).Microseconds()) / 1000
		mu.Lock()
		latencies = append(latencies, ms)
		if !ok {
			errors++
		}
		mu.Unlock()
	}

	start := time.Now().Add(200 * time.Millisecond)
	stop := start.Add(*duration)
	var wg sync.WaitGroup
	if *rate <= 0 {
		for c := 0; c < *connections; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				time.Sleep(time.Until(start))
				for i := c; time.Now().Before(stop); i += *connections {
					began := time.Now()
					record(began, send(i))
				}
			}(c)
		}
	} else {
		due := make(chan struct {
			i  int
			at time.Time
		}, 1<<20)
		interval := time.Duration(float64(time.Second) / *rate)
		go func() {
			defer close(due)
			for i := 0; ; i++ {
				at := start.Add(time.Duration(i) * interval)
				if !at.Before(stop) {
					return
				}
				time.Sleep(time.Until(at))
				due <- struct {
					i  int
					at time.Time
				}{i, at}
			}
		}()
		for c := 0; c < *connections; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for job := range due {
					record(job.at, send(job.i))
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	sort.Float64s(latencies)
	pct := func(q float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		i := int(q / 100 * float64(len(latencies)))
		if i >= len(latencies) {
			i = len(latencies) - 1
		}
		return latencies[i]
	}
	out := map[string]float64{
		"requests": float64(len(latencies)), "errors": float64(errors), "seconds": elapsed,
		"rate": float64(len(latencies)) / elapsed, "p50": pct(50), "p99": pct(99), "p999": pct(99.9),
	}
	check(json.NewEncoder(os.Stdout).Encode(out))
}

func readBodies(name string) [][]byte {
	f, err := os.Open(name)
	check(err)
	defer f.Close()
	var bodies [][]byte
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 8<<20)
	for scanner.Scan() {
		if line := bytes.TrimSpace(scanner.Bytes()); len(line) > 0 {
			bodies = append(bodies, append([]byte(nil), line...))
		}
	}
	check(scanner.Err())
	if len(bodies) == 0 {
		check(fmt.Errorf("no bodies in %s", name))
	}
	return bodies
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
}
