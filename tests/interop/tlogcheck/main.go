// Command tlogcheck is an independent cross-check of an Engram tlog-tiles
// export against the Go reference implementation of transparency logs,
// golang.org/x/mod/sumdb/tlog and golang.org/x/mod/sumdb/note.
//
// Usage:
//
//	tlogcheck -vkey VKEY -dir DIR [-checkpoint FILE]
//
// DIR is a C2SP tlog-tiles directory (https://c2sp.org/tlog-tiles):
//
//	DIR/checkpoint                    C2SP signed note (tlog-checkpoint)
//	DIR/tile/<L>/<N>[.p/<W>]          hash tiles, height 8
//	DIR/tile/entries/<N>[.p/<W>]      entry bundles
//
// It prints "OK origin=... size=... root=... entries=..." and exits 0 when
// everything verifies, or prints "FAIL: <reason>" and exits 1.
//
// Build (GOPATH mode, Debian's golang-golang-x-mod-dev sources):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o tlogcheck ./tests/interop/tlogcheck
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// tileHeight is fixed by C2SP tlog-tiles: every tile holds up to 2^8 = 256
// hashes (or entries), so a tile spans 8 levels of the Merkle tree.
const tileHeight = 8

const tileWidth = 1 << tileHeight // 256

func fail(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

// ---------------------------------------------------------------------------
// Path mapping between x/mod tiles and C2SP tlog-tiles paths.
//
// x/mod names a tile tlog.Tile{H, L, N, W} and its own Tile.Path() renders it
// as "tile/<H>/<L>/<N>[.p/<W>]", with L = -1 spelled "data". C2SP has no
// height component (the height is always 8) and calls level -1 "entries":
//
//	x/mod:  tile/8/0/x001/x234/067.p/5     C2SP: tile/0/x001/x234/067.p/5
//	x/mod:  tile/8/data/005                C2SP: tile/entries/005
//
// Both encode N the same way: split into 3-digit decimal groups, most
// significant first, every group but the last prefixed with "x"
// (1234067 -> x001/x234/067, 5 -> 005). The ".p/<W>" suffix is present only
// for partial tiles (W < 256).
// ---------------------------------------------------------------------------

// encodeIndex renders N as C2SP path elements, e.g. 1234067 -> "x001/x234/067".
func encodeIndex(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// c2spPath returns the C2SP tlog-tiles path (relative to DIR) of an x/mod
// tile. Level -1 (x/mod's record-data tiles) maps to entry bundles.
func c2spPath(t tlog.Tile) string {
	level := strconv.Itoa(t.L)
	if t.L == -1 {
		level = "entries"
	}
	p := "tile/" + level + "/" + encodeIndex(t.N)
	if t.W < tileWidth {
		p += ".p/" + strconv.Itoa(t.W)
	}
	return p
}

// tileWidthFor returns the width a tile at (level, n) must have in a tree of
// the given size: 256 for a full tile, fewer for the rightmost partial tile.
// Level L stores the Merkle nodes of tree level 8*L; there are size>>(8*L).
func tileWidthFor(size int64, level int, n int64) int {
	count := (size >> (tileHeight * level)) - n*tileWidth
	if count > tileWidth {
		count = tileWidth
	}
	return int(count)
}

// ---------------------------------------------------------------------------
// tlog.TileReader over a C2SP directory.
// ---------------------------------------------------------------------------

type dirTileReader struct {
	dir   string
	cache map[tlog.Tile][]byte
}

func (r *dirTileReader) Height() int { return tileHeight }

// SaveTiles is a no-op: the directory is read-only input.
func (r *dirTileReader) SaveTiles([]tlog.Tile, [][]byte) {}

func (r *dirTileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := r.readHashTile(t)
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

// readHashTile returns the W*32 bytes of hash tile t, read from its C2SP path.
func (r *dirTileReader) readHashTile(t tlog.Tile) ([]byte, error) {
	if t.H != tileHeight || t.L < 0 {
		return nil, fmt.Errorf("unexpected tile request %+v", t)
	}
	if data, ok := r.cache[t]; ok {
		return data, nil
	}
	data, _, err := r.readFile(t)
	if err != nil {
		return nil, err
	}
	if len(data) != t.W*tlog.HashSize {
		return nil, fmt.Errorf("%s: %d bytes, want %d (%d hashes)",
			c2spPath(t), len(data), t.W*tlog.HashSize, t.W)
	}
	r.cache[t] = data
	return data, nil
}

// readFile reads the file for tile t. C2SP lets a log drop a partial tile
// once the full tile exists; a client may then use the full tile's prefix,
// and readFile reports fromFull = true. Hash tiles are truncated to W hashes
// here; entry bundles are parsed entry by entry by the caller.
func (r *dirTileReader) readFile(t tlog.Tile) (data []byte, fromFull bool, err error) {
	data, err = os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(c2spPath(t))))
	if err == nil || t.W == tileWidth || !errors.Is(err, fs.ErrNotExist) {
		return data, false, err
	}
	full := t
	full.W = tileWidth
	data, ferr := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(c2spPath(full))))
	if ferr != nil {
		return nil, false, err // report the missing partial tile
	}
	fmt.Fprintf(os.Stderr, "note: %s missing, using prefix of %s\n", c2spPath(t), c2spPath(full))
	if t.L >= 0 && len(data) >= t.W*tlog.HashSize {
		data = data[:t.W*tlog.HashSize]
	}
	return data, true, nil
}

// rawHashReader reads stored hashes straight from the tiles WITHOUT
// authenticating them against the checkpoint, so that a mismatching root can
// be reported as "tiles give X, checkpoint says Y".
func rawHashReader(size int64, r *dirTileReader) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			t := tlog.TileForIndex(tileHeight, x) // narrowest tile holding x
			t.W = tileWidthFor(size, t.L, t.N)    // the tile as published
			data, err := r.readHashTile(t)
			if err != nil {
				return nil, err
			}
			if out[i], err = tlog.HashFromTile(t, data, x); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// ---------------------------------------------------------------------------
// Checkpoint (C2SP tlog-checkpoint inside a C2SP signed note).
// ---------------------------------------------------------------------------

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

func readCheckpoint(path, vkey string) checkpoint {
	msg, err := os.ReadFile(path)
	if err != nil {
		fail("reading checkpoint: %v", err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		fail("parsing verifier key: %v", err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		fail("checkpoint signature does not verify with %s: %v", v.Name(), err)
	}

	// The note text is exactly three newline-terminated lines:
	// origin, decimal tree size, base64 root hash.
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		fail("checkpoint body must be exactly 3 lines, got %q", n.Text)
	}
	var c checkpoint
	c.origin = lines[0]
	if c.origin != v.Name() {
		fail("checkpoint origin %q != key name %q", c.origin, v.Name())
	}
	sz := lines[1]
	if sz == "" || strings.Trim(sz, "0123456789") != "" || (len(sz) > 1 && sz[0] == '0') {
		fail("checkpoint tree size %q is not a canonical decimal", sz)
	}
	if c.size, err = strconv.ParseInt(sz, 10, 64); err != nil {
		fail("checkpoint tree size %q: %v", sz, err)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		fail("checkpoint root hash %q is not base64 of 32 bytes", lines[2])
	}
	copy(c.root[:], raw)
	return c
}

// ---------------------------------------------------------------------------
// Entry bundles.
// ---------------------------------------------------------------------------

// readBundle returns the w entries of bundle n. A bundle is the concatenation
// of entries, each prefixed with its length as a big-endian uint16.
func readBundle(r *dirTileReader, n int64, w int) ([][]byte, error) {
	t := tlog.Tile{H: tileHeight, L: -1, N: n, W: w}
	data, fromFull, err := r.readFile(t)
	if err != nil {
		return nil, err
	}
	var entries [][]byte
	for len(data) > 0 && len(entries) < w {
		if len(data) < 2 {
			return nil, fmt.Errorf("%s: truncated length prefix", c2spPath(t))
		}
		l := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+l {
			return nil, fmt.Errorf("%s: entry %d truncated (%d of %d bytes)",
				c2spPath(t), len(entries), len(data)-2, l)
		}
		entries = append(entries, data[2:2+l])
		data = data[2+l:]
	}
	if len(entries) != w {
		return nil, fmt.Errorf("%s: %d entries, want %d", c2spPath(t), len(entries), w)
	}
	if len(data) != 0 && !fromFull {
		return nil, fmt.Errorf("%s: %d trailing bytes after %d entries", c2spPath(t), len(data), w)
	}
	return entries, nil
}

// ---------------------------------------------------------------------------

func main() {
	vkey := flag.String("vkey", "", "log verifier key (name+hash+base64)")
	dir := flag.String("dir", "", "C2SP tlog-tiles directory")
	cpPath := flag.String("checkpoint", "", "checkpoint file (default DIR/checkpoint)")
	flag.Parse()
	if *vkey == "" || *dir == "" || flag.NArg() != 0 {
		fail("usage: tlogcheck -vkey VKEY -dir DIR [-checkpoint FILE]")
	}
	if *cpPath == "" {
		*cpPath = filepath.Join(*dir, "checkpoint")
	}

	// 1. Signed checkpoint.
	cp := readCheckpoint(*cpPath, strings.TrimSpace(*vkey))
	size, root := cp.size, cp.root
	rootB64 := base64.StdEncoding.EncodeToString(root[:])

	// x/mod defines the empty tree's hash as all zeros; RFC 9162 and C2SP
	// define it as SHA-256 of the empty string.
	if size == 0 {
		if root != tlog.Hash(sha256.Sum256(nil)) {
			fail("size 0 but root %s != SHA-256(\"\")", rootB64)
		}
		fmt.Printf("OK origin=%s size=0 root=%s entries=0\n", cp.origin, rootB64)
		return
	}

	// 2. Root hash recomputed from the hash tiles.
	reader := &dirTileReader{dir: *dir, cache: map[tlog.Tile][]byte{}}
	got, err := tlog.TreeHash(size, rawHashReader(size, reader))
	if err != nil {
		fail("reading hash tiles: %v", err)
	}
	if got != root {
		fail("root from tiles %s != checkpoint root %s", got, rootB64)
	}
	// The same through x/mod's authenticating tile reader, used below.
	hr := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, reader)
	if got, err = tlog.TreeHash(size, hr); err != nil || got != root {
		fail("x/mod TileHashReader: root %s, err %v", got, err)
	}

	// 3. Every entry: its record hash must be the level-0 hash in the tiles.
	recordHashes := make([]tlog.Hash, size)
	for n := int64(0); n*tileWidth < size; n++ {
		w := tileWidthFor(size, 0, n)
		entries, err := readBundle(reader, n, w)
		if err != nil {
			fail("entry bundle: %v", err)
		}
		idx := make([]int64, w)
		for j := range idx {
			idx[j] = tlog.StoredHashIndex(0, n*tileWidth+int64(j))
		}
		leaves, err := hr.ReadHashes(idx)
		if err != nil {
			fail("reading level-0 hashes of bundle %d: %v", n, err)
		}
		for j, e := range entries {
			i := n*tileWidth + int64(j)
			recordHashes[i] = tlog.RecordHash(e)
			if recordHashes[i] != leaves[j] {
				fail("entry %d: record hash %s != tile hash %s", i, recordHashes[i], leaves[j])
			}
		}
	}

	// 4. Rebuild the whole tree from the entries alone with x/mod's own
	// StoredHashes, and require every published hash tile to match it byte
	// for byte. (x/mod's TileHashReader does not authenticate every full tile
	// it loads against its parent, so step 3 alone would not catch a
	// tampered, self-consistent upper-level tile.)
	mem := make([]tlog.Hash, 0, tlog.StoredHashCount(size))
	memReader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			out[i] = mem[x]
		}
		return out, nil
	})
	for i, rh := range recordHashes {
		hs, err := tlog.StoredHashesForRecordHash(int64(i), rh, memReader)
		if err != nil {
			fail("StoredHashes(%d): %v", i, err)
		}
		mem = append(mem, hs...)
	}
	if got, err := tlog.TreeHash(size, memReader); err != nil || got != root {
		fail("root rebuilt from entries %s != checkpoint root %s (err %v)", got, rootB64, err)
	}
	for _, t := range tlog.NewTiles(tileHeight, 0, size) {
		if t.W != tileWidthFor(size, t.L, t.N) {
			continue // an intermediate width of the last tile, not published
		}
		want, err := tlog.ReadTileData(t, memReader)
		if err != nil {
			fail("ReadTileData(%v): %v", t, err)
		}
		have, err := reader.readHashTile(t)
		if err != nil {
			fail("reading hash tile: %v", err)
		}
		for off := range want {
			if have[off] != want[off] {
				fail("%s: byte %d is 0x%02x, want 0x%02x (hash %d)",
					c2spPath(t), off, have[off], want[off], off/tlog.HashSize)
			}
		}
	}

	// 5. Inclusion proofs for a sample of entries.
	for _, i := range sample(size, []int64{0, 1, size / 2, size - 1}, 37, 0) {
		proof, err := tlog.ProveRecord(size, i, hr)
		if err != nil {
			fail("ProveRecord(%d, %d): %v", size, i, err)
		}
		if err := tlog.CheckRecord(proof, size, root, i, recordHashes[i]); err != nil {
			fail("CheckRecord(%d, %d): %v", size, i, err)
		}
	}

	// 6. Consistency proofs from a few smaller trees m to the checkpoint.
	for _, m := range sample(size+1, []int64{1, 2, size / 2, size - 1, size}, 0, 1) {
		old, err := tlog.TreeHash(m, hr)
		if err != nil {
			fail("TreeHash(%d): %v", m, err)
		}
		proof, err := tlog.ProveTree(size, m, hr)
		if err != nil {
			fail("ProveTree(%d, %d): %v", size, m, err)
		}
		if err := tlog.CheckTree(proof, size, root, m, old); err != nil {
			fail("CheckTree(%d, %d): %v", size, m, err)
		}
	}

	fmt.Printf("OK origin=%s size=%d root=%s entries=%d\n", cp.origin, size, rootB64, size)
}

// sample returns the distinct values of fixed, plus every step-th value if
// step > 0, restricted to [lo, limit).
func sample(limit int64, fixed []int64, step, lo int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	add := func(i int64) {
		if i >= lo && i < limit && !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	for _, i := range fixed {
		add(i)
	}
	for i := int64(0); step > 0 && i < limit; i += step {
		add(i)
	}
	return out
}
