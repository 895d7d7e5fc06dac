package main

import (
	"fmt"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeChart draws the closed-loop point-select workload: throughput and
// p99 latency per contender at each concurrency, one row of panels per
// server, as a PNG.
func writeChart(path string, rep *Report) error {
	var servers []string
	for _, r := range rep.Rows {
		if r.Workload == wSelect && !slices.Contains(servers, r.Server) {
			servers = append(servers, r.Server)
		}
	}
	if len(servers) == 0 {
		return nil
	}
	plots := make([][]*plot.Plot, len(servers))
	for i, server := range servers {
		thr, err := barPanel(rep, server, fmt.Sprintf("%s: point select, closed loop, N=10 — throughput", server),
			"ops/s (median)", func(r Row) float64 { return r.OpsPerS })
		if err != nil {
			return err
		}
		p99, err := barPanel(rep, server, fmt.Sprintf("%s: p99 latency", server),
			"p99 (ms, median)", func(r Row) float64 { return float64(r.P99) / 1e6 })
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{thr, p99}
	}
	img := vgimg.New(vg.Points(1300), vg.Points(float64(430*len(servers))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(servers), Cols: 2, PadX: vg.Points(20), PadY: vg.Points(20),
		PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}

// barPanel groups one bar per contender at each goroutine count.
func barPanel(rep *Report, server, title, ylabel string, value func(Row) float64) (*plot.Plot, error) {
	var gs []int
	var names []string
	for _, r := range rep.Rows {
		if r.Server != server || r.Workload != wSelect {
			continue
		}
		if !slices.Contains(gs, r.Goroutines) {
			gs = append(gs, r.Goroutines)
		}
		if !slices.Contains(names, r.Contender) {
			names = append(names, r.Contender)
		}
	}
	slices.Sort(gs)
	slices.SortStableFunc(names, func(a, b string) int { return contenderRank(a) - contenderRank(b) })

	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.X.Label.Text = "goroutines"
	labels := make([]string, len(gs))
	for i, g := range gs {
		labels[i] = fmt.Sprint(g)
	}
	p.NominalX(labels...)
	width := vg.Points(min(14, 80/float64(len(names))))
	top := 0.0
	for i, name := range names {
		vals := make(plotter.Values, len(gs))
		for j, g := range gs {
			for _, r := range rep.Rows {
				if r.Server == server && r.Workload == wSelect && r.Goroutines == g && r.Contender == name {
					vals[j] = value(r)
					top = max(top, vals[j])
				}
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(contenderRank(name)) // one colour per contender in every panel
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(names)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(name, bars)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	p.Y.Max = top * 1.45 // room for the legend above the bars
	return p, nil
}
