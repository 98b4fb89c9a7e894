package web_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/web"
)

// worldMap is web/dashboard/world.json, the dashboard's world map
// (docs/dashboard.md#locations): one SVG path per country, in the Natural
// Earth projection, keyed by ISO 3166-1 alpha-2 code.
type worldMap struct {
	Credit    string            `json:"credit"`
	ViewBox   string            `json:"view_box"`
	Names     map[string]string `json:"names"`
	Countries []worldCountry    `json:"countries"`
}

// worldCountry is a country's path (the names are apart: the small
// countries the map has no shape for have a name too).
type worldCountry struct {
	ID string `json:"id"`
	D  string `json:"d"`
}

// worldMapBudget bounds the embedded map, uncompressed: it is fetched once
// per page load, when the Locations panel shows its map.
const worldMapBudget = 80 << 10

// The embedded map is small, names its source and licence, and every path
// is a country code's. With TALLY_WORLD_ATLAS set to world-atlas's
// countries-110m.json (npm world-atlas@2, ISC; Natural Earth, public
// domain) the test writes the file again from it and Debian's iso-codes
// (the country names).
func TestDashboardWorldMap(t *testing.T) {
	if src := os.Getenv("TALLY_WORLD_ATLAS"); src != "" {
		b, err := generateWorldMap(src, "/usr/share/iso-codes/json/iso_3166-1.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("dashboard/world.json", b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := fs.ReadFile(web.Dashboard(), "world.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > worldMapBudget {
		t.Errorf("world.json: got %d bytes, want at most %d", len(b), worldMapBudget)
	}
	var m worldMap
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Credit, "Natural Earth") || !strings.Contains(m.Credit, "world-atlas") {
		t.Errorf("credit: got %q, want Natural Earth and world-atlas named", m.Credit)
	}
	code := regexp.MustCompile(`^[A-Z]{2}$`)
	seen := map[string]bool{}
	for _, c := range m.Countries {
		if !code.MatchString(c.ID) || seen[c.ID] || m.Names[c.ID] == "" || !strings.HasPrefix(c.D, "M") {
			t.Errorf("country %q: want a new two-letter code, a name and a path", c.ID)
		}
		seen[c.ID] = true
	}
	for _, want := range []string{"DE", "US", "FR", "BR", "IN", "AU", "JP", "ZA"} {
		if !seen[want] {
			t.Errorf("no path for %s", want)
		}
	}
}

// generateWorldMap projects world-atlas's TopoJSON countries into SVG
// paths on a 1000-unit-wide canvas, rounded to whole units (a 0.36° grid:
// enough for a panel), Antarctica left out.
func generateWorldMap(atlas, isoCodes string) ([]byte, error) {
	var topo struct {
		Transform struct{ Scale, Translate [2]float64 }
		Objects   struct {
			Countries struct {
				Geometries []struct {
					Type string
					ID   string
					Arcs json.RawMessage
				}
			}
		}
		Arcs [][][2]float64
	}
	b, err := os.ReadFile(atlas)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &topo); err != nil {
		return nil, err
	}
	var iso struct {
		Codes []struct {
			Alpha2  string `json:"alpha_2"`
			Numeric string `json:"numeric"`
			Name    string `json:"name"`
			Common  string `json:"common_name"`
		} `json:"3166-1"`
	}
	if b, err = os.ReadFile(isoCodes); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &iso); err != nil {
		return nil, err
	}
	byNumeric := map[string][2]string{}
	names := map[string]string{}
	for _, c := range iso.Codes {
		name := c.Name
		if c.Common != "" {
			name = c.Common
		}
		byNumeric[c.Numeric] = [2]string{c.Alpha2, name}
		names[c.Alpha2] = name
	}
	// The arcs, decoded (delta-encoded, quantized), in degrees.
	arcs := make([][][2]float64, len(topo.Arcs))
	for i, a := range topo.Arcs {
		var x, y float64
		for _, p := range a {
			x, y = x+p[0], y+p[1]
			lon := x*topo.Transform.Scale[0] + topo.Transform.Translate[0]
			lat := y*topo.Transform.Scale[1] + topo.Transform.Translate[1]
			arcs[i] = append(arcs[i], [2]float64{lon, lat})
		}
	}
	const width = 1000.0
	k := width / (2 * naturalEarth(180, 0)[0])
	ring := func(idx []int) [][2]float64 {
		var pts [][2]float64
		for j, a := range idx {
			var seg [][2]float64
			if a >= 0 {
				seg = arcs[a]
			} else {
				seg = append([][2]float64(nil), arcs[^a]...)
				for l, r := 0, len(seg)-1; l < r; l, r = l+1, r-1 {
					seg[l], seg[r] = seg[r], seg[l]
				}
			}
			if j > 0 {
				seg = seg[1:]
			}
			pts = append(pts, seg...)
		}
		return pts
	}
	top, bottom := math.Inf(1), math.Inf(-1)
	type shape struct {
		id, name string
		rings    [][][2]float64
	}
	var shapes []shape
	for _, g := range topo.Objects.Countries.Geometries {
		c, ok := byNumeric[g.ID]
		if !ok || g.ID == "010" { // unnamed areas, Antarctica
			continue
		}
		var polys [][][]int
		switch g.Type {
		case "Polygon":
			var p [][]int
			if err := json.Unmarshal(g.Arcs, &p); err != nil {
				return nil, err
			}
			polys = [][][]int{p}
		case "MultiPolygon":
			if err := json.Unmarshal(g.Arcs, &polys); err != nil {
				return nil, err
			}
		default:
			continue
		}
		s := shape{id: c[0], name: c[1]}
		for _, p := range polys {
			for _, r := range p {
				pts := ring(r)
				for i := range pts {
					// A ring across the antimeridian (Fiji, Russia's east)
					// is kept whole past the right edge, clipped there.
					if i > 0 && pts[i][0]-pts[i-1][0] < -180 {
						pts[i][0] += 360
					} else if i > 0 && pts[i][0]-pts[i-1][0] > 180 {
						pts[i][0] -= 360
					}
				}
				for i := range pts {
					p := naturalEarth(pts[i][0], pts[i][1])
					pts[i] = [2]float64{(p[0] + naturalEarth(180, 0)[0]) * k, -p[1] * k}
					top, bottom = math.Min(top, pts[i][1]), math.Max(bottom, pts[i][1])
				}
				s.rings = append(s.rings, pts)
			}
		}
		shapes = append(shapes, s)
	}
	sort.Slice(shapes, func(i, j int) bool { return shapes[i].id < shapes[j].id })
	m := worldMap{Credit: "Natural Earth (public domain), via world-atlas 2.0.2 (ISC, Michael Bostock): countries-110m",
		ViewBox: fmt.Sprintf("0 0 %d %d", int(width), int(math.Ceil(bottom-top))), Names: names}
	for _, s := range shapes {
		var d strings.Builder
		for _, r := range s.rings {
			var px, py int
			n := 0
			for i, p := range r {
				x, y := int(math.Round(p[0])), int(math.Round(p[1]-top))
				if i == 0 {
					fmt.Fprintf(&d, "M%d %d", x, y)
				} else if x != px || y != py {
					fmt.Fprintf(&d, "l%s %s", strconv.Itoa(x-px), strconv.Itoa(y-py))
					n++
				} else {
					continue
				}
				px, py = x, y
			}
			if n < 2 { // a ring smaller than the grid: an island of a point
				continue
			}
			d.WriteString("z")
		}
		if d.Len() == 0 {
			continue
		}
		path := strings.ReplaceAll(d.String(), " -", "-")
		// a ring dropped above may leave a lone M: keep closed rings only
		m.Countries = append(m.Countries, worldCountry{ID: s.id, D: dropOpenMoves(path)})
	}
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return []byte(out.String()), nil
}

// dropOpenMoves removes the moves of rings that were too small to draw.
func dropOpenMoves(d string) string {
	parts := strings.SplitAfter(d, "z")
	var keep []string
	for _, p := range parts {
		if i := strings.LastIndex(p, "M"); i > 0 {
			p = p[i:]
		}
		if strings.HasSuffix(p, "z") {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "")
}

// naturalEarth is the Natural Earth projection (Šavrič et al. 2011) of a
// point in degrees, on the unit sphere.
func naturalEarth(lon, lat float64) [2]float64 {
	l, p := lon*math.Pi/180, lat*math.Pi/180
	p2 := p * p
	p4 := p2 * p2
	x := l * (0.8707 - 0.131979*p2 + p4*(-0.013791+p4*(0.003971*p2-0.001529*p4)))
	y := p * (1.007226 + p2*(0.015085+p4*(-0.044475+0.028874*p2-0.005916*p4)))
	return [2]float64{x, y}
}
