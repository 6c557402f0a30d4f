#!/bin/sh
# The hostile corpus: mutations of files attnscope itself writes, and special files
# and links in their place, written into DIR with a manifest that says how to run each one.
#
#   sh fuzz/hostile.sh BUILD/attnscope DIR [OUTSIDE]
#
# OUTSIDE (default DIR/../outside) is a directory the corpus's links point into: the test puts
# sentinel files there and checks that no run changed them. DIR/MANIFEST has one line per run:
#
#   CLASS <TAB> EXPECT <TAB> ARG <TAB> ARG ...
#
# EXPECT is "err" (the run must exit 2 or 3 with one line on stderr), "any" (a benign mutation:
# exit 0 or 1 allowed too, e.g. a bit flip in tensor data, an escaped name, an unknown key; never
# a signal or a hang) or "known" (a broken input attnscope is known to accept, reported in the
# test's table but not failed on; never a signal or a hang either). Needs python3 (binary mutations); the HDF5 classes need h5py, the
# import classes (npz, npy and safetensors of docs/IMPORT.md's scheme, checked directly) numpy (else they are left out
# with a line on stderr).
set -eu
BIN=${1:?usage: hostile.sh PATH/TO/attnscope DIR [OUTSIDE]}
DIR=${2:?usage: hostile.sh PATH/TO/attnscope DIR [OUTSIDE]}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
# a DIR this script wrote before is rewritten; any other DIR must be empty or new
if [ -e "$DIR/MANIFEST" ]; then
    rm -rf "$DIR"
elif [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
    echo "hostile.sh: $DIR is not empty (and not a corpus)" >&2
    exit 2
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
OUTSIDE=${3:-$DIR/../outside}
mkdir -p "$OUTSIDE"
OUTSIDE=$(cd "$OUTSIDE" && pwd)
export ATTNSCOPE_CACHE="$DIR/cache"
B="$DIR/base"
rm -rf "$B"
mkdir -p "$B"
M="$DIR/MANIFEST"
: >"$M"

# a python3 with h5py where there is one (the system's), else any python3
PY=python3
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import h5py' 2>/dev/null; then PY=$p; break; fi
done
HAVE_H5PY=0
"$PY" -c 'import h5py' 2>/dev/null && HAVE_H5PY=1

# ---- what attnscope writes
"$BIN" gen --preset tiny -o "$B/tiny" >/dev/null
"$BIN" gen --preset tiny --layout released --shards 3 -o "$B/rel" >/dev/null
"$BIN" convert --to gguf --quant q8_0 "$B/tiny" "$B/tiny.gguf" >/dev/null
cat >"$B/script.json" <<EOF
{"name": "hostile base", "model": "$B/tiny", "engine": "off", "inputs": {"seed": 1},
 "steps": [{"prefill": 3}, {"decode": 2}]}
EOF
cat >"$B/dumper.json" <<EOF
{"model": "$B/tiny", "engine": "off", "inputs": {"seed": 1}, "steps": [{"prefill": 3}, {"decode": 2}],
 "dump": {"path": "$B/dump.h5", "layers": [0, 2], "steps": "all", "tensors": "q,o"}}
EOF
"$BIN" run -q "$B/dumper.json" >/dev/null
cat >"$B/inputs.json" <<EOF
{"model": "$B/tiny", "engine": "off", "inputs": {"file": "$B/dump.h5"}, "steps": [{"prefill": 3}]}
EOF

# ---- the mutations (python: bytes and JSON text)
"$PY" - "$B" "$DIR" "$OUTSIDE" "$M" <<'PY'
import json, os, random, re, shutil, struct, sys
B, D, OUT, MAN = sys.argv[1:5]
rnd = random.Random(35)
man = open(MAN, "a")
def entry(cls, expect, *args):
    man.write("\t".join([cls, expect] + [str(a) for a in args]) + "\n")
n = [0]
def fresh(cls):
    n[0] += 1
    p = os.path.join(D, "%s-%03d" % (cls, n[0]))
    return p
def rd(p): return open(p, "rb").read()
def wr(p, b):
    with open(p, "wb") as f: f.write(b)
def model_with(cls, files):
    """a copy of the tiny model dir with some files replaced: files = {name: bytes}"""
    p = fresh(cls)
    os.mkdir(p)
    for f in ("config.json", "model.safetensors"):
        if f in files: wr(os.path.join(p, f), files[f])
        else: shutil.copyfile(os.path.join(B, "tiny", f), os.path.join(p, f))
    return p
def offsets(size, k, b=None):
    s = sorted(set([0, 1, 4, 7, 8, 9, size // 2, size - 1] + [rnd.randrange(1, size) for _ in range(k)]))
    # a cut that removes only trailing whitespace or zero padding leaves the file whole: left out
    return [o for o in s if 0 <= o < size and (b is None or b[o:].strip(b" \t\r\n\0") != b"")]
def flips(b, k):
    out = []
    for _ in range(k):
        x = bytearray(b); o = rnd.randrange(len(x)); x[o] ^= 1 << rnd.randrange(8); out.append((o, bytes(x)))
    return out
def flips_in(b, lo, hi, k):
    out = []
    for _ in range(k):
        x = bytearray(b); o = rnd.randrange(lo, hi); x[o] ^= 1 << rnd.randrange(8); out.append(bytes(x))
    return out

ST = rd(os.path.join(B, "tiny", "model.safetensors"))
CFG = rd(os.path.join(B, "tiny", "config.json"))
hlen = struct.unpack("<Q", ST[:8])[0]
HDR = json.loads(ST[8:8 + hlen])
DATA = ST[8 + hlen:]
def st_from_header_text(text, data=DATA):
    t = text.encode() if isinstance(text, str) else text
    t += b" " * (-len(t) % 8)
    return struct.pack("<Q", len(t)) + t + data

# safetensors: truncations, header length, header bit flips (checked: must fail), data flips (benign)
for o in offsets(len(ST), 6, ST):
    p = model_with("st", {"model.safetensors": ST[:o]})
    entry("st-truncate", "err", "info", p)
    entry("st-truncate", "err", "convert", "--to", "gguf", "--quant", "bf16", p, p + ".out.gguf")
for v in (0, 1, 7, hlen + 1, len(ST), len(ST) - 7, 1 << 31, 1 << 40, (1 << 63) - 1, (1 << 64) - 1):
    entry("st-header-len", "err", "info", model_with("st", {"model.safetensors": struct.pack("<Q", v) + ST[8:]}))
for x in flips_in(ST, 8, 8 + hlen, 12):
    # a flip in the header JSON may land in a name's letters or a digit: the model then lacks a
    # tensor or a shape/offset is off; either way not the model it was: must be refused
    entry("st-header-flip", "any", "info", model_with("st", {"model.safetensors": x}))
for x in flips_in(ST, 8 + hlen, len(ST), 6):
    entry("st-data-flip", "any", "info", model_with("st", {"model.safetensors": x}))
names = [k for k in HDR if k != "__metadata__"]
def hdr_mut(f):
    h = json.loads(json.dumps(HDR)); f(h); return h
t0 = names[0]
for shape in ([1 << 32, 1 << 32], [1 << 62, 4], [-1, 4], [0, 0], [2**64 + 5], [1] * 70, []):
    h = hdr_mut(lambda h: h[t0].__setitem__("shape", shape))
    entry("st-huge-shape", "err", "info", model_with("st", {"model.safetensors": st_from_header_text(json.dumps(h))}))
for offs in ([0, 1 << 62], [1 << 40, (1 << 40) + 8], [8, 4], [0, len(DATA) + 1], [-8, 0]):
    h = hdr_mut(lambda h: h[t0].__setitem__("data_offsets", offs))
    entry("st-huge-offsets", "err", "info", model_with("st", {"model.safetensors": st_from_header_text(json.dumps(h))}))
for dt in ("Q99", "", "F64", 7):
    h = hdr_mut(lambda h: h[t0].__setitem__("dtype", dt))
    entry("st-dtype", "err", "info", model_with("st", {"model.safetensors": st_from_header_text(json.dumps(h))}))
ht = json.dumps(HDR)
first = json.dumps({t0: HDR[t0]})[1:-1]
entry("st-dup-key", "err", "info", model_with("st", {"model.safetensors": st_from_header_text("{" + first + "," + ht[1:])}))
entry("st-trailing", "err", "info", model_with("st", {"model.safetensors": st_from_header_text(ht + "}")}))
entry("st-trailing", "err", "info", model_with("st", {"model.safetensors": st_from_header_text(ht + "garbage")}))
entry("st-deep", "err", "info", model_with("st", {"model.safetensors": st_from_header_text(
    '{"__metadata__": ' + "[" * 5000 + "]" * 5000 + "," + ht[1:])}))
for bad in (b"\xff\xfe", b"\xc0\xaf", b"\x1b[2J\x1b]0;pwn\x07", b"\xed\xa0\x80"):
    h = ht.encode().replace(t0.encode(), t0.encode() + bad, 1)
    entry("st-bad-name", "err", "info", model_with("st", {"model.safetensors": st_from_header_text(h)}))

# config.json: truncations, flips, nesting, duplicate keys, trailing garbage, invalid UTF-8
for o in offsets(len(CFG), 4, CFG):
    entry("cfg-truncate", "err", "info", model_with("cfg", {"config.json": CFG[:o]}))
for o, x in flips(CFG, 16):
    entry("cfg-flip", "any", "info", model_with("cfg", {"config.json": x}))
cj = json.loads(CFG)
def cfg_text(t): return model_with("cfg", {"config.json": t.encode() if isinstance(t, str) else t})
for depth in (65, 1000, 100000):
    entry("cfg-deep", "err", "info", cfg_text('{"x": ' + "[" * depth + "]" * depth + "," + CFG.decode().strip()[1:]))
entry("cfg-deep", "err", "info", cfg_text("{" + '"a":{' * 3000 + "}" * 3000 + "}"))
k0 = list(cj)[0]
for v in (json.dumps(cj[k0]), '"x"', "1e999"):
    entry("cfg-dup-key", "err", "info", cfg_text('{"%s": %s, ' % (k0, v) + CFG.decode().strip()[1:]))
for g in ("x", "}", "{}", "\x00garbage", "[1]", "\n\n// c"):
    entry("cfg-trailing", "err", "info", cfg_text(CFG.decode() + g))
# one NUL byte alone after the value is trailing garbage too
entry("cfg-trailing-nul", "err", "info", cfg_text(CFG.decode() + "\x00"))
for bad in (b"\xff", b"\xc3", b"\x1b[2J", b"\xe2\x80\xae"):
    # an unknown key is ignored: benign, but never echoed raw
    entry("cfg-bad-utf8-key", "any", "info", cfg_text(b'{"' + bad + b'": 1, ' + CFG.strip()[1:]))
    entry("cfg-bad-utf8-value", "err", "info", cfg_text(b'{"num_hidden_layers": "1' + bad + b'", ' + CFG.strip()[1:].replace(b'"num_hidden_layers"', b'"x_num_hidden_layers"', 1)))
for k, v in ((k0, 1 << 62), (k0, -1), (k0, 1e308), ("num_hidden_layers", 1 << 31), ("hidden_size", 1 << 40)):
    c = dict(cj); c[k] = v
    entry("cfg-huge", "err", "info", cfg_text(json.dumps(c)))

# GGUF: truncations, flips, huge counts
G = rd(os.path.join(B, "tiny.gguf"))
def gg(cls, b):
    p = fresh(cls) + ".gguf"; wr(p, b); return p
for o in offsets(len(G), 8, G):
    entry("gguf-truncate", "err", "info", gg("gguf", G[:o]))
for x in flips_in(G, 0, min(len(G), 4096), 14):
    entry("gguf-header-flip", "any", "info", gg("gguf", x))
for off, fmt, v in ((8, "<Q", 1 << 62), (8, "<Q", (1 << 64) - 1), (8, "<Q", 1 << 31), (16, "<Q", 1 << 62),
                    (16, "<Q", 1 << 33), (24, "<Q", 1 << 62), (24, "<Q", 1 << 40), (24, "<Q", 0), (4, "<I", 99), (4, "<I", 0)):
    x = bytearray(G); struct.pack_into(fmt, x, off, v)
    entry("gguf-huge-count", "err", "info", gg("gguf", bytes(x)))
entry("gguf-trailing", "any", "info", gg("gguf", G + b"garbage" * 3))

# the released layout: index mutations, shard truncation, links
REL = os.path.join(B, "rel")
IDX = rd(os.path.join(REL, "model.safetensors.index.json"))
ij = json.loads(IDX)
def rel_with(cls, files):
    p = fresh(cls); shutil.copytree(REL, p, symlinks=True)
    for k, v in files.items():
        fp = os.path.join(p, k)
        if os.path.lexists(fp): os.remove(fp)
        if v is not None: wr(fp, v)
    return p
wm = ij["weight_map"]; n0 = [k for k in wm if ".attn." in k][0]  # a tensor the attention reads
entry("idx-dup-key", "err", "info", rel_with("idx", {"model.safetensors.index.json":
      b'{"weight_map": {}, ' + json.dumps(ij)[1:].encode()}))
entry("idx-dup-key", "err", "info", rel_with("idx", {"model.safetensors.index.json":
      re.sub(rb'"weight_map":\s*\{', b'"weight_map": {"%s": "x.safetensors", ' % n0.encode(), IDX, count=1)}))
entry("idx-trailing", "err", "info", rel_with("idx", {"model.safetensors.index.json": IDX + b"]"}))
entry("idx-deep", "err", "info", rel_with("idx", {"model.safetensors.index.json": b'{"metadata": ' + b"[" * 4000 + b"]" * 4000 + b", " + IDX.strip()[1:]}))
for o in offsets(len(IDX), 3, IDX):
    entry("idx-truncate", "err", "info", rel_with("idx", {"model.safetensors.index.json": IDX[:o]}))
for sh in ("../../../../etc/passwd", "/etc/passwd", "nope.safetensors", "", "a\x1b[2Jb.safetensors"):
    j = json.loads(IDX); j["weight_map"][n0] = sh
    entry("idx-bad-shard", "err", "info", rel_with("idx", {"model.safetensors.index.json": json.dumps(j).encode()}))
shards = sorted(set(wm.values()))
for o in (0, 8, 100):
    s = rd(os.path.join(REL, shards[0]))
    entry("rel-shard-truncate", "err", "info", rel_with("rel", {shards[0]: s[:o]}))
# inference/config.json is not what info reads when config.json is there: benign
entry("rel-inference-trailing", "any", "info", rel_with("rel", {"inference/config.json":
      rd(os.path.join(REL, "inference", "config.json")) + b"x"}))

# scripts: truncations, flips, nesting, dup keys, trailing garbage, names with ESC / invalid UTF-8
S = rd(os.path.join(B, "script.json"))
def sc(cls, b):
    p = fresh(cls) + ".json"; wr(p, b); return p
for o in offsets(len(S), 4, S):
    entry("script-truncate", "err", "run", "-q", sc("script", S[:o]))
for o, x in flips(S, 10):
    entry("script-flip", "any", "run", "-q", sc("script", x))
entry("script-deep", "err", "run", "-q", sc("script", S.strip()[:-1] + b', "comment": ' + b"[" * 10000 + b"]" * 10000 + b"}"))
entry("script-dup-key", "err", "run", "-q", sc("script", b'{"engine": "off", ' + S.strip()[1:]))
entry("script-dup-key", "err", "run", "-q", sc("script", S.strip()[:-1] + b', "steps": [{"prefill": 1}]}'))
for g in (b"x", b"}", b"{}", b"\x00garbage"):
    entry("script-trailing", "err", "run", "-q", sc("script", S + g))
entry("script-trailing-nul", "err", "run", "-q", sc("script", S + b"\x00"))
for bad in (b"\x1b[2J\x1b]0;pwn\x07", b"\xff\xfe", b"\xc0\x80", b"\x07\x08\x7f"):
    # the name only reaches reports and messages, escaped: a benign mutation, exit 0 expected
    s2 = S.replace(b"hostile base", b"hostile " + bad, 1)
    rep = fresh("script-report") + ".json"
    j = s2.strip()[:-1] + b', "report": {"json": "' + rep.encode() + b'"}}'
    entry("script-bad-name", "any", "run", "-q", sc("script", j))
for st in (b'[{"prefill": 4294967296}]', b'[{"decode": -1}]', b'[{"prefill": 1}]' + b"", b'[' + b'{"decode": 1},' * 2000 + b'{"decode": 1}]'):
    entry("script-huge-steps", "err", "run", "-q", sc("script", S.replace(b'[{"prefill": 3}, {"decode": 2}]', st))) if st != b'[{"prefill": 1}]' else None
DUMP = os.path.join(B, "dump.h5")
MODEL = os.path.join(B, "tiny")
X = open(DUMP, "rb").read()
def each_cmd(cls, expect, p, cmds=("dump-info", "check", "diff")):
    for c in cmds:
        if c == "dump-info": entry(cls, expect, "dump-info", p)
        elif c == "check": entry(cls, expect, "check", p, "--model", MODEL, "--quiet")
        elif c == "diff": entry(cls, expect, "diff", p, DUMP)
sz = len(X)
for o in sorted(set([0, 7, 8, 100, 512, 2048, sz // 4, sz // 2, sz - 100, sz - 1])):
    p = fresh("dump-truncate") + ".h5"; open(p, "wb").write(X[:o])
    each_cmd("dump-truncate", "err", p, ("dump-info", "check") if o % 2 else ("dump-info", "diff"))
for _ in range(24):
    x = bytearray(X); o = rnd.randrange(min(sz, 8192)); x[o] ^= 1 << rnd.randrange(8)
    p = fresh("dump-flip") + ".h5"; open(p, "wb").write(bytes(x))
    each_cmd("dump-flip", "any", p, (rnd.choice(("dump-info", "check", "diff")),))
p = fresh("dump-trailing") + ".h5"; open(p, "wb").write(X + b"garbage" * 10)
each_cmd("dump-trailing", "any", p, ("dump-info",))
man.close()
PY

# ---- dumps (h5py): truncations, flips, attributes, hard-linked groups, a far step
DUMP="$B/dump.h5"
if [ $HAVE_H5PY = 1 ]; then
"$PY" - "$B" "$DIR" "$M" <<'PY'
import h5py, os, random, shutil, sys
B, D, MAN = sys.argv[1:4]
man = open(MAN, "a")
rnd = random.Random(36)
def entry(cls, expect, *args): man.write("\t".join([cls, expect] + [str(a) for a in args]) + "\n")
n = [0]
def fresh(cls):
    n[0] += 1; return os.path.join(D, "%s-h%03d.h5" % (cls, n[0]))
DUMP = os.path.join(B, "dump.h5")
MODEL = os.path.join(B, "tiny")
X = open(DUMP, "rb").read()
def each_cmd(cls, expect, p, cmds=("dump-info", "check", "diff")):
    for c in cmds:
        if c == "dump-info": entry(cls, expect, "dump-info", p)
        elif c == "check": entry(cls, expect, "check", p, "--model", MODEL, "--quiet")
        elif c == "diff": entry(cls, expect, "diff", p, DUMP)
def mutated(cls, f):
    p = fresh(cls); shutil.copyfile(DUMP, p)
    with h5py.File(p, "r+") as h: f(h)
    return p
def first_attr_obj(h):
    return h
# attributes holding ESC sequences and invalid UTF-8, one attribute at a time; never raw on the terminal
for path, attr in (("/", "attnscope_version"), ("/", "created"), ("/", "weights_name"), ("/", "mode"),
                   ("/", "precision"), ("steps/0000", "kind"), ("inputs/h0", "dims")):
    for bad in (b"\x1b[2J\x1b]0;pwn\x07", b"\xff\xfe\xfd", b"\xc0\xaf\xed\xa0\x80"):
        def f(h, path=path, attr=attr, bad=bad):
            o = h[path]
            if attr in o.attrs:
                v = o.attrs[attr]
                o.attrs[attr] = __import__("numpy").bytes_((v.encode() if isinstance(v, str) else bytes(v)) + bad)
        p = mutated("dump-bad-attr", f)
        # every string attribute attnscope reads is refused when it holds a control character or
        # is not UTF-8; inputs/h0's dims (a note for h5py readers) is not read: benign
        cls, ex = ("dump-bad-attr-unread", "any") if attr == "dims" else ("dump-bad-attr", "err")
        entry(cls, ex, "dump-info", p)
        entry(cls, ex, "dump-info", "--json", p)
# hard-linked step groups: one group under many names
def steps_group(h):
    for k in ("steps", "runs"):
        if k in h: return h[k]
    return None
def hardlinks(count):
    def f(h):
        g = steps_group(h)
        if g is None: return
        names = list(g)
        first = names[0]
        for i in range(count): g["%s_l%d" % (first, i)] = g[first]
    return f
for c in (1, 50, 3000):
    each_cmd("dump-hardlink", "err", mutated("dump-hardlink", hardlinks(c)), ("dump-info", "check"))
# a step claiming a far position
def far(pos):
    def f(h):
        g = steps_group(h)
        if g is None: return
        last = sorted(g)[-1]
        for k in g[last].attrs:
            if "pos" in k: g[last].attrs[k] = pos
    return f
for pos in (290011, 1 << 30, -5):
    each_cmd("dump-far-step", "err", mutated("dump-far-step", far(pos)), ("check",))
# config_json replaced: trailing garbage, duplicate keys, deep nesting
def cfgattr(t):
    def f(h):
        if "config_json" in h.attrs: h.attrs["config_json"] = t(h.attrs["config_json"])
    return f
dec = lambda v: v.decode() if isinstance(v, bytes) else v
for t in (lambda v: dec(v) + "x", lambda v: '{"a": 1, "a": 2, ' + dec(v).strip()[1:], lambda v: '{"z": ' + "[" * 9000 + "]" * 9000 + ", " + dec(v).strip()[1:]):
    each_cmd("dump-config-json", "err", mutated("dump-config-json", cfgattr(t)), ("dump-info", "check"))
man.close()
PY
else
    echo "hostile.sh: no h5py: the dump mutation classes left out" >&2
fi

# ---- imports (docs/IMPORT.md): npz, npy and safetensors of the scheme, mutated; checked directly
if "$PY" -c 'import numpy' 2>/dev/null; then
"$PY" - "$B" "$DIR" "$M" <<'PY'
import json, os, random, struct, sys
import numpy as np
B, D, MAN = sys.argv[1:4]
man = open(MAN, "a")
rnd = random.Random(37)
def entry(cls, expect, *args): man.write("\t".join([cls, expect] + [str(a) for a in args]) + "\n")
n = [0]
def fresh(cls, ext):
    n[0] += 1; return os.path.join(D, "%s-i%03d%s" % (cls, n[0], ext))
MODEL = os.path.join(B, "tiny")
cfg = json.load(open(os.path.join(MODEL, "config.json")))
dim, nh, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
# a prefill of 3 and one decode step: h0, x, q, out of layers 0 and 2
meta = {"step0/start_pos": 0, "step0/tokens": 3, "step1/start_pos": 3, "step1/tokens": 1}
T = {}
for s, toks in ((0, 3), (1, 1)):
    T[f"step{s}/h0"] = rnd.random() * np.ones((toks, dim), np.float32)
    for l in (0, 2):
        T[f"step{s}/layer{l}/x"] = np.full((toks, dim), 0.5, np.float32)
        T[f"step{s}/layer{l}/q"] = np.zeros((toks, nh, hd), np.float32)
        T[f"step{s}/layer{l}/out"] = np.zeros((toks, dim), np.float32)
META = os.path.join(B, "imp.json")
json.dump(meta, open(META, "w"))
np.savez(os.path.join(B, "imp.npz"), **T)
np.savez_compressed(os.path.join(B, "impz.npz"), **T)
def st_bytes(tensors, md, extra=""):
    hdr, blobs, off = {"__metadata__": {k: str(v) for k, v in md.items()}}, [], 0
    for k, a in tensors.items():
        b = a.astype("<f4").tobytes(); hdr[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    t = json.dumps(hdr)
    if extra: t = "{" + extra + ", " + t[1:]
    t = t.encode(); t += b" " * (-len(t) % 8)
    return struct.pack("<Q", len(t)) + t + b"".join(blobs)
ST = st_bytes(T, meta)
open(os.path.join(B, "imp.safetensors"), "wb").write(ST)
def check(cls, expect, *files): entry(cls, expect, "check", MODEL, *files, "--quiet")
def wr(cls, ext, b):
    p = fresh(cls, ext); open(p, "wb").write(b); return p
# the intact inputs check (exit 0 or 1: the values are not the reference's)
check("import-intact", "any", os.path.join(B, "imp.npz"), META)
check("import-intact", "any", os.path.join(B, "impz.npz"), META)
check("import-intact", "any", os.path.join(B, "imp.safetensors"))
for name in ("imp.npz", "impz.npz"):
    Z = open(os.path.join(B, name), "rb").read()
    for o in sorted(set([0, 4, 21, 30, 100, len(Z) // 2, len(Z) - 23, len(Z) - 22, len(Z) - 1] +
                        [rnd.randrange(1, len(Z)) for _ in range(3)])):
        check("npz-truncate", "err", wr("npz-truncate", ".npz", Z[:o]), META)
    end = Z.rfind(b"PK\x05\x06")
    cd = struct.unpack_from("<I", Z, end + 16)[0]
    for off, fmt, v in ((end + 16, "<I", 0xFFFFFFFF), (end + 16, "<I", len(Z)), (end + 12, "<I", 0x7FFFFFFF),
                        (end + 10, "<H", 0xFFFF), (end + 8, "<H", 0), (cd + 42, "<I", 0xFFFFFFFE), (cd + 42, "<I", cd),
                        (cd + 20, "<I", 0x7FFFFFFF), (cd + 24, "<I", 0xFFFFFFFF), (cd + 28, "<H", 0xFFFF)):
        x = bytearray(Z); struct.pack_into(fmt, x, off, v)
        check("npz-bad-offsets", "err", wr("npz-bad-offsets", ".npz", bytes(x)), META)
    for _ in range(8):
        x = bytearray(Z); o = rnd.randrange(cd, len(Z)); x[o] ^= 1 << rnd.randrange(8)
        check("npz-directory-flip", "any", wr("npz-directory-flip", ".npz", bytes(x)), META)
    for _ in range(6):
        x = bytearray(Z); o = rnd.randrange(0, cd); x[o] ^= 1 << rnd.randrange(8)
        # stored data or a deflate stream: the CRC or the stream finds it; a local header's time: benign
        check("npz-member-flip", "any", wr("npz-member-flip", ".npz", bytes(x)), META)
# one member twice under the same name
import zipfile
p = fresh("npz-dup-member", ".npz")
with zipfile.ZipFile(p, "w") as z:
    import io, warnings
    warnings.simplefilter("ignore")
    for k in ("step0/layer0/x", "step0/layer0/x"):
        b = io.BytesIO(); np.save(b, T["step0/layer0/x"]); z.writestr(k + ".npy", b.getvalue())
check("npz-dup-member", "err", p, META)
# .npy: truncations, header length and shape claims, dtypes numpy has that the scheme refuses
def npy(a, **kw):
    import io
    b = io.BytesIO(); np.lib.format.write_array(b, a, **kw); return b.getvalue()
X = npy(T["step0/layer0/x"])
def npy_dir(cls, name, b):
    d = fresh(cls, ""); os.mkdir(d); open(os.path.join(d, name), "wb").write(b); json.dump(meta, open(os.path.join(d, "m.json"), "w")); return d
for o in (0, 6, 9, 10, 60, len(X) - 4, len(X) - 1):
    check("npy-truncate", "err", npy_dir("npy-truncate", "step0.layer0.x.npy", X[:o]))
for v in (0xFFFF, 0):
    x = bytearray(X); struct.pack_into("<H", x, 8, v)
    check("npy-header-len", "err", npy_dir("npy-header-len", "step0.layer0.x.npy", bytes(x)))
x = bytearray(b"\x93NUMPY\x02\x00") + struct.pack("<I", 0xFFFFFFF0) + X[10:]
check("npy-header-len", "err", npy_dir("npy-header-len", "step0.layer0.x.npy", bytes(x)))
hdr_end = X.index(b"\n", 10)
for shape in ("(3, 64000000000000)", "(" + ", ".join(["1"] * 64) + ")", "(18446744073709551616,)", "(-3, 64)",
              "(3, 65)", "(4, 64)"):
    h = ("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape).encode()
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    check("npy-huge-shape", "err", npy_dir("npy-huge-shape", "step0.layer0.x.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + X[hdr_end + 1:]))
for a in (np.array([["a"] * dim] * 3, dtype=object), np.zeros((3, dim), np.complex64), np.zeros((3, dim), "U1"),
          np.zeros((3, dim), [("a", "<f4")]), np.asfortranarray(np.zeros((dim, 3), np.float32)).T.copy(order="F")):
    try:
        b = npy(a, allow_pickle=True)
    except Exception:
        continue
    check("npy-dtype", "err", npy_dir("npy-dtype", "step0.layer0.x.npy", b))
# names and metadata
for name in ("step0.layer99.x.npy", "step9.layer0.x.npy", "step0.layer0.bogus.npy", "hidden_states.npy", "step0.layer0.x.npy.pt"):
    check("import-bad-name", "err", npy_dir("import-bad-name", name, X))
d = npy_dir("import-dup-tensor", "step0.layer0.x.npy", X); check("import-dup-tensor", "err", d, os.path.join(B, "imp.npz"), META)
for bad in ({"step0/start_pos": 0}, {"step0/start_pos": 0, "step0/tokens": 3, "step0/start_pos ": 1},
            {"step0/start_pos": -1, "step0/tokens": 3}, {"step0/start_pos": 0, "step0/tokens": 1 << 40}):
    p = fresh("import-bad-meta", ".json"); json.dump(bad, open(p, "w"))
    check("import-bad-meta", "err", os.path.join(B, "imp.npz"), p)
p = fresh("import-bad-meta", ".json"); open(p, "w").write(json.dumps(meta)[:-1] + ', "step0/tokens": 3}')
check("import-bad-meta", "err", os.path.join(B, "imp.npz"), p)
# safetensors of the scheme: truncated, a key twice, metadata that is not strings
for o in (8, 100, len(ST) - 1):
    check("st-import-truncate", "err", wr("st-import-truncate", ".safetensors", ST[:o]))
check("st-import-dup-key", "err", wr("st-import-dup-key", ".safetensors", st_bytes(T, meta, '"step0/layer0/x": {"dtype": "F32", "shape": [3, 64], "data_offsets": [0, 768]}')))
x = ST.replace(b'"step0/tokens": "3"', b'"step0/tokens":  3 ', 1)   # the same length: a number where a string must be
check("st-import-meta", "err", wr("st-import-meta", ".safetensors", x))
man.close()
PY
else
    echo "hostile.sh: no numpy: the import classes left out" >&2
fi

# ---- links and FIFOs in place of inputs
mk() { # name: a fresh copy of the tiny model directory
    d="$DIR/$1"; rm -rf "$d"; cp -r "$B/tiny" "$d"; echo "$d"
}
e() { printf '%s' "$1"; shift; for a; do printf '\t%s' "$a"; done; printf '\n'; } >>"$M"
# symlinks: config.json to outside the test dir (a sentinel, /etc/passwd, /dev/null, /dev/zero), dangling, a loop
for t in "$OUTSIDE/sentinel.txt" /etc/passwd /dev/null /dev/zero /nonexistent/x; do
    d=$(mk "link-cfg-$(echo "$t" | tr -c 'a-z0-9\n' _)"); rm "$d/config.json"; ln -s "$t" "$d/config.json"
    e link-cfg-outside err info "$d"
done
d=$(mk link-cfg-loop); rm "$d/config.json"; ln -s config.json "$d/config.json"; e link-loop err info "$d"
d=$(mk link-cfg-loop2); rm "$d/config.json"; ln -s b "$d/config.json"; ln -s config.json "$d/b"; e link-loop err info "$d"
# the weights a link leading out (to a copy of itself outside: refused by the shard rule) or to a device
cp "$B/tiny/model.safetensors" "$OUTSIDE/model.safetensors"
d=$(mk link-st-out); rm "$d/model.safetensors"; ln -s "$OUTSIDE/model.safetensors" "$d/model.safetensors"
# the single-file layout's model.safetensors linked out of the directory is refused, as a shard is
e link-weights-outside err info "$d"
d=$(mk link-st-dev); rm "$d/model.safetensors"; ln -s /dev/zero "$d/model.safetensors"; e link-shard-outside err info "$d"
d=$(mk link-st-dangling); rm "$d/model.safetensors"; ln -s nothing "$d/model.safetensors"; e link-dangling err info "$d"
d=$(mk link-st-loop); rm "$d/model.safetensors"; ln -s model.safetensors "$d/model.safetensors"; e link-loop err info "$d"
d="$DIR/link-rel-shard"; cp -r "$B/rel" "$d"; s=$(ls "$d" | grep -m1 '^model-0'); mv "$d/$s" "$OUTSIDE/$s"; ln -s "$OUTSIDE/$s" "$d/$s"
e link-shard-outside err info "$d"
ln -s "$OUTSIDE/nothing.json" "$DIR/link-script-dangling.json"; e link-dangling err run -q "$DIR/link-script-dangling.json"
ln -s link-script-loop.json "$DIR/link-script-loop.json"; e link-loop err run -q "$DIR/link-script-loop.json"
ln -s "$OUTSIDE/nothing.h5" "$DIR/link-dump-dangling.h5"; e link-dangling err dump-info "$DIR/link-dump-dangling.h5"
ln -s link-dump-loop.h5 "$DIR/link-dump-loop.h5"; e link-loop err check "$DIR/link-dump-loop.h5" --model "$B/tiny"
ln -s /dev/zero "$DIR/link-dump-zero.h5"; e link-device err dump-info "$DIR/link-dump-zero.h5"
ln -s /etc/passwd "$DIR/link-gguf-passwd.gguf"; e link-outside err info "$DIR/link-gguf-passwd.gguf"
# a dump whose weights_name leads out, checked without --model (must not load the outside copy)
if [ $HAVE_H5PY = 1 ]; then
    for w in ../../../../tiny "$OUTSIDE" ../outside /etc; do
        p="$DIR/dump-weights-name-$(echo "$w" | tr -c 'a-z0-9\n' _).h5"; cp "$DUMP" "$p"
        "$PY" -c 'import h5py,sys; h=h5py.File(sys.argv[1],"r+"); h.attrs["weights_name"]=sys.argv[2]; h.close()' "$p" "$w"
        e dump-weights-name err check "$p" --quiet
    done
fi
# FIFOs in place of config.json, a shard, the index, a GGUF, a script, a dump, an inputs file
d=$(mk fifo-cfg); rm "$d/config.json"; mkfifo "$d/config.json"; e fifo err info "$d"
d=$(mk fifo-st); rm "$d/model.safetensors"; mkfifo "$d/model.safetensors"; e fifo err info "$d"
d=$(mk fifo-st-convert); rm "$d/model.safetensors"; mkfifo "$d/model.safetensors"; e fifo err convert --to gguf --quant bf16 "$d" "$DIR/fifo-convert-out.gguf"
d="$DIR/fifo-idx"; cp -r "$B/rel" "$d"; rm "$d/model.safetensors.index.json"; mkfifo "$d/model.safetensors.index.json"; e fifo err info "$d"
d="$DIR/fifo-shard"; cp -r "$B/rel" "$d"; s=$(ls "$d" | grep -m1 '^model-0'); rm "$d/$s"; mkfifo "$d/$s"; e fifo err info "$d"
d="$DIR/fifo-inference-cfg"; cp -r "$B/rel" "$d"; rm "$d/inference/config.json"; mkfifo "$d/inference/config.json"; e fifo-unread any info "$d" # not read when config.json is there
mkfifo "$DIR/fifo.gguf"; e fifo err info "$DIR/fifo.gguf"
mkfifo "$DIR/fifo-script.json"; e fifo err run -q "$DIR/fifo-script.json"
mkfifo "$DIR/fifo-dump.h5"; e fifo err dump-info "$DIR/fifo-dump.h5"; e fifo err check "$DIR/fifo-dump.h5" --model "$B/tiny"
e fifo err diff "$DIR/fifo-dump.h5" "$DUMP"; e fifo err diff "$DUMP" "$DIR/fifo-dump.h5"
mkfifo "$DIR/fifo-inputs.h5"
sed "s|$B/dump.h5|$DIR/fifo-inputs.h5|" "$B/inputs.json" >"$DIR/fifo-inputs-script.json"; e fifo err run -q "$DIR/fifo-inputs-script.json"
ln -s "$DIR/fifo-dump.h5" "$DIR/link-to-fifo.h5"; e fifo err dump-info "$DIR/link-to-fifo.h5"
# imports: a FIFO named as an input and one among a directory's files, a link to a directory, a device
if [ -f "$B/imp.json" ]; then
    mkfifo "$DIR/fifo-import.npy"; e fifo err check "$B/tiny" "$DIR/fifo-import.npy" "$B/imp.json" --quiet
    mkdir "$DIR/fifo-import-dir"; mkfifo "$DIR/fifo-import-dir/step0.layer0.x.npy"; cp "$B/imp.json" "$DIR/fifo-import-dir/"
    e fifo err check "$B/tiny" "$DIR/fifo-import-dir" --quiet
    mkdir "$DIR/link-import-dir"; ln -s "$OUTSIDE" "$DIR/link-import-dir/out"; cp "$B/imp.json" "$DIR/link-import-dir/"
    e link-outside err check "$B/tiny" "$DIR/link-import-dir" --quiet
    ln -s /dev/zero "$DIR/link-import-zero.npz"; e link-device err check "$B/tiny" "$DIR/link-import-zero.npz" "$B/imp.json" --quiet
    e fifo err import "$B/tiny" "$DIR/fifo-import.npy" "$B/imp.json" -o "$DIR/fifo-import-out.h5"
fi
# directories and devices where a file is named
e special err dump-info /dev/null; e special err dump-info "$DIR"; e special err run -q /dev/null; e special err info /dev/null
d=$(mk dir-cfg); rm "$d/config.json"; mkdir "$d/config.json"; e special err info "$d"
wc -l <"$M" | sed 's/^/hostile.sh: entries: /' >&2
