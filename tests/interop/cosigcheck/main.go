// cosigcheck: an independent check of Engram's witness cosignatures (c2sp.org/tlog-cosignature
// v1) with golang.org/x/mod/sumdb/note and Go's crypto/ed25519.
//
//	cosigcheck verify -vkey LOGVKEY -witness COSIGNERVKEY... -file CHECKPOINT
//	    opens the note with the log key and each cosigner as note verifiers; prints
//	    "OK log=<name> cosigners=<names,...>" or fails (exit 1).
//	cosigcheck sign -name NAME -seed HEX32 -time T -file CHECKPOINT
//	    prints the checkpoint with one more signature line: a cosignature by that key.
//	cosigcheck vkey -name NAME -seed HEX32
//	    prints the cosigner verifier key.
package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

const algCosignature = 0x04

func keyHash(name string, pub []byte) []byte {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', algCosignature})
	h.Write(pub)
	return h.Sum(nil)[:4]
}

func message(ts uint64, text []byte) []byte {
	m := []byte("cosignature/v1\ntime " + strconv.FormatUint(ts, 10) + "\n")
	return append(m, text...)
}

type cosigner struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
	ts   uint64
}

func (c *cosigner) Name() string    { return c.name }
func (c *cosigner) KeyHash() uint32 { return c.hash }

func (c *cosigner) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig[:8])
	if ts == 0 || ts >= 1<<63 {
		return false
	}
	return ed25519.Verify(c.pub, message(ts, msg), sig[8:])
}

func (c *cosigner) Sign(msg []byte) ([]byte, error) {
	out := make([]byte, 8, 8+ed25519.SignatureSize)
	binary.BigEndian.PutUint64(out, c.ts)
	return append(out, ed25519.Sign(c.priv, message(c.ts, msg))...), nil
}

func parseCosigner(vkey string) (*cosigner, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, errors.New("cosigner vkey is not name+id+key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != algCosignature {
		return nil, errors.New("cosigner vkey is not a 0x04 Ed25519 key")
	}
	h := keyHash(parts[0], raw[1:])
	if hex.EncodeToString(h) != parts[1] {
		return nil, fmt.Errorf("cosigner key id %s, computed %x", parts[1], h)
	}
	return &cosigner{name: parts[0], hash: binary.BigEndian.Uint32(h), pub: ed25519.PublicKey(raw[1:])}, nil
}

func fromSeed(name, seedHex string) *cosigner {
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != ed25519.SeedSize {
		fail("seed must be 32 bytes of hex")
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &cosigner{name: name, hash: binary.BigEndian.Uint32(keyHash(name, pub)), pub: pub, priv: priv}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: cosigcheck verify|sign|vkey ...")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	vkey := fs.String("vkey", "", "log verifier key")
	file := fs.String("file", "", "checkpoint note")
	name := fs.String("name", "", "cosigner name")
	seed := fs.String("seed", "", "cosigner Ed25519 seed, hex")
	ts := fs.Uint64("time", 0, "cosignature timestamp")
	var witnesses multi
	fs.Var(&witnesses, "witness", "cosigner verifier key (repeatable)")
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "vkey":
		c := fromSeed(*name, *seed)
		fmt.Printf("%s+%08x+%s\n", c.name, c.hash, base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, c.pub...)))
	case "sign":
		data, err := os.ReadFile(*file)
		if err != nil {
			fail("%v", err)
		}
		c := fromSeed(*name, *seed)
		c.ts = *ts
		// The checkpoint text is everything before the blank line; keep its signatures.
		i := strings.LastIndex(string(data), "\n\n")
		if i < 0 {
			fail("not a note")
		}
		signed, err := note.Sign(&note.Note{Text: string(data[:i+1])}, c)
		if err != nil {
			fail("%v", err)
		}
		j := strings.LastIndex(string(signed), "\n\n")
		os.Stdout.Write(data)
		os.Stdout.Write(signed[j+2:])
	case "verify":
		data, err := os.ReadFile(*file)
		if err != nil {
			fail("%v", err)
		}
		logV, err := note.NewVerifier(*vkey)
		if err != nil {
			fail("log vkey: %v", err)
		}
		verifiers := []note.Verifier{logV}
		for _, w := range witnesses {
			c, err := parseCosigner(w)
			if err != nil {
				fail("%v", err)
			}
			verifiers = append(verifiers, c)
		}
		n, err := note.Open(data, note.VerifierList(verifiers...))
		if err != nil {
			fail("note.Open: %v", err)
		}
		logOK := false
		var names []string
		for _, s := range n.Sigs {
			if s.Name == logV.Name() && s.Hash == logV.KeyHash() {
				logOK = true
			} else {
				names = append(names, s.Name)
			}
		}
		if !logOK {
			fail("no log signature")
		}
		sort.Strings(names)
		fmt.Printf("OK log=%s cosigners=%s\n", logV.Name(), strings.Join(names, ","))
	default:
		fail("unknown command %s", os.Args[1])
	}
}
