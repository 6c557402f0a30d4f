// kernels/sparse_attn.cu on the emulator with a real layer's operands (tools/emu/dump_attn.c): runs
// the tensor-core kernel (and the warp kernel) for chosen queries t on exactly the reference's q,
// rows, idx and sink, and compares with the reference o (SPEC 6 tolerance over the whole tensor) and
// with an f64 evaluation of SPEC 3 step 7. Each query is its own launch of one block per head block
// (the blocks are independent: grid (1, nsplit, nh / 64) on the query's slices).
// With the window rows' pre-quantisation values in the dump it also reports, per query, how far one
// benign fp8 flip of a window row (SPEC 6: one bf16 ulp before the quantiser) can move o.
//   emu_attn_real DUMP_FILE [T0 T1 ...]     (default t = 0..7)
//   env: EMU_SPLIT=n (mma splits); EMU_SHOW="h d" (that element, and the rows whose flip moves it);
//        EMU_FLIP="row channel value" (no kernel: the o mismatch that kv[row][channel] = value causes)
#include "emu.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
alignas(128) uint8_t smem[232448];
}
#include "kernels/sparse_attn.cu"

extern "C" {
#include "ref/numerics.h"
#include "ref/quant.h"
}

template <class T> static void rd(FILE *f, T *p, size_t n)
{
    if (fread(p, sizeof(T), n, f) != n) {
        fprintf(stderr, "short dump file\n");
        exit(2);
    }
}

struct Dump {
    int s, nh, hd, nrows, topk, na;
    std::vector<float> sink, q, rows, o;
    std::vector<int32_t> idx;
    std::vector<float> kv_pre; // [s][hd] when the dump has it (rows_a = the chunk's kv rows)
};

// bf16 neighbour of a bf16 value (dir +1 / -1 in value).
static float bf16_step(float x, int dir)
{
    uint16_t b = as_bf16_bits(x);
    const bool neg = b & 0x8000;
    if ((dir > 0) != neg)
        b = (b & 0x7fff) == 0x7f80 ? b : (uint16_t)(b + 1);
    else if ((b & 0x7fff) == 0)
        b = (uint16_t)((b ^ 0x8000) + 1);
    else
        b = (uint16_t)(b - 1);
    return as_bf16_to_f32(b);
}

// Quantisation flips of the fp8 window rows (SPEC 6): flip[r][d] = the largest |change| of kv[r][d]
// when one input of its block (the element itself, or the block's amax element: a scale step) moves
// by one bf16 ulp before the quantiser. Such a change is benign for kv, but it reaches o as
// p_r * flip[r][d].
static std::vector<float> fp8_flip_sizes(const Dump &D)
{
    const int hd = D.hd;
    std::vector<float> flip((size_t)D.s * hd, 0.0f);
    float blk[AS_FP8_BLOCK];
    for (int r = 0; r < D.s; r++)
        for (int b0 = 0; b0 < hd; b0 += AS_FP8_BLOCK) {
            const float *pre = &D.kv_pre[(size_t)r * hd + b0];
            const float *kv = &D.rows[(size_t)r * hd + b0];
            int am = 0;
            for (int e = 1; e < AS_FP8_BLOCK; e++)
                if (fabsf(pre[e]) > fabsf(pre[am]))
                    am = e;
            for (int e = 0; e < AS_FP8_BLOCK; e++)
                for (int dir = -1; dir <= 1; dir += 2) {
                    memcpy(blk, pre, sizeof blk);
                    blk[e] = bf16_step(blk[e], dir);
                    as_fp8_quant(blk, AS_FP8_BLOCK, AS_FP8_BLOCK);
                    for (int d = 0; d < AS_FP8_BLOCK; d++)
                        if (d == e || e == am) {
                            float &fl = flip[(size_t)r * hd + b0 + d];
                            fl = fmaxf(fl, fabsf(blk[d] - kv[d]));
                        }
                }
        }
    return flip;
}

// SPEC 3 step 7 in f64 for (t, h): o_ref64[d].
static void attend64(const Dump &D, int t, int h, std::vector<double> &out, double &zmax, double &pmax, int &nvalid,
                     std::vector<std::pair<int, double>> *probs = nullptr)
{
    const int hd = D.hd;
    const float *q = &D.q[((size_t)t * D.nh + h) * hd];
    std::vector<double> z;
    std::vector<int> r;
    for (int j = 0; j < D.topk; j++) {
        int v = D.idx[(size_t)t * D.topk + j];
        if (v < 0 || v >= D.nrows)
            continue;
        double acc = 0;
        for (int d = 0; d < hd; d++)
            acc += (double)q[d] * D.rows[(size_t)v * hd + d];
        z.push_back(acc / sqrt((double)hd));
        r.push_back(v);
    }
    nvalid = (int)z.size();
    out.assign(hd, 0.0);
    zmax = -INFINITY;
    for (double x : z)
        zmax = fmax(zmax, x);
    if (z.empty())
        return;
    const double m = fmax(zmax, (double)D.sink[h]);
    double den = exp((double)D.sink[h] - m);
    for (double x : z)
        den += exp(x - m);
    pmax = 0;
    for (size_t i = 0; i < z.size(); i++) {
        const double p = exp(z[i] - m) / den;
        pmax = fmax(pmax, p);
        if (probs)
            probs->push_back({r[i], p});
        for (int d = 0; d < hd; d++)
            out[d] += p * D.rows[(size_t)r[i] * hd + d];
    }
}

template <int HD> static void run_mma(AttnArgs a, int nsplit_want, int nh)
{
    const int ntiles = (a.topk + kTR - 1) / kTR;
    int nsplit = nsplit_want < 1 ? 1 : nsplit_want > ntiles ? ntiles : nsplit_want;
    int tps = (ntiles + nsplit - 1) / nsplit;
    tps = tps > kMaxSplitTiles ? kMaxSplitTiles : tps;
    nsplit = (ntiles + tps - 1) / tps;
    a.tiles_per_split = tps;
    std::vector<float> ws;
    if (nsplit > 1) {
        ws.assign((size_t)nsplit * nh * (HD + 2), NAN);
        a.ws_o = ws.data();
        a.ws_ml = ws.data() + (size_t)nsplit * nh * HD;
    }
    emu::launch(dim3(1, nsplit, (nh + kHB - 1) / kHB), dim3(kThreads), [&] { sparse_attn_mma_kernel<HD>(a); });
    if (nsplit > 1)
        emu::launch(dim3(1, nh), dim3(128),
                    [&] { sparse_attn_combine_kernel(a.ws_o, a.ws_ml, a.sink, a.o, nh, HD, nsplit); });
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DUMP_FILE [t ...]\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    Dump D;
    int32_t hdr[6];
    rd(f, hdr, 6);
    D.s = hdr[0], D.nh = hdr[1], D.hd = hdr[2], D.nrows = hdr[3], D.topk = hdr[4], D.na = hdr[5];
    const size_t nq = (size_t)D.s * D.nh * D.hd;
    D.sink.resize(D.nh), D.q.resize(nq), D.rows.resize((size_t)D.nrows * D.hd), D.o.resize(nq);
    D.idx.resize((size_t)D.s * D.topk);
    rd(f, D.sink.data(), D.sink.size());
    rd(f, D.q.data(), nq);
    rd(f, D.rows.data(), D.rows.size());
    rd(f, D.o.data(), nq);
    rd(f, D.idx.data(), D.idx.size());
    int32_t more = 0;
    if (fread(&more, sizeof more, 1, f) == 1 && more == 1 && D.na == D.s) {
        D.kv_pre.resize((size_t)D.s * D.hd);
        rd(f, D.kv_pre.data(), D.kv_pre.size());
    }
    fclose(f);
    std::vector<int> ts;
    for (int i = 2; i < argc; i++)
        ts.push_back(atoi(argv[i]));
    if (ts.empty())
        for (int t = 0; t < 8 && t < D.s; t++)
            ts.push_back(t);
    const int split = getenv("EMU_SPLIT") ? atoi(getenv("EMU_SPLIT")) : 1;
    const int nh = D.nh, hd = D.hd, topk = D.topk;

    std::vector<float> flip;
    if (!D.kv_pre.empty()) {
        std::vector<float> chk(D.kv_pre);
        as_fp8_quant(chk.data(), (int64_t)chk.size(), AS_FP8_BLOCK);
        if (memcmp(chk.data(), D.rows.data(), sizeof(float) * chk.size()) != 0)
            printf("note: the rows are not fp8(kv_pre): no flip analysis\n");
        else
            flip = fp8_flip_sizes(D);
    }
    double maxw = 0, qmax = 0, rmax = 0;
    for (float v : D.o) maxw = fmax(maxw, fabs(v));
    for (float v : D.q) qmax = fmax(qmax, fabs(v));
    for (float v : D.rows) rmax = fmax(rmax, fabs(v));
    float smin = INFINITY, smax = -INFINITY;
    for (float v : D.sink) smin = fminf(smin, v), smax = fmaxf(smax, v);
    const double tol = maxw * 0x1p-7 + 1e-4;
    if (getenv("EMU_FLIP")) {
        // "r d v": what o would be if window row r had kv[r][d] = v (a quantisation flip on the other
        // side): for every query attending row r, o += p_r (v - kv[r][d]) in channel d (f64 softmax
        // weights), rounded to bf16, against the reference o by the SPEC 6 rule. No kernel runs.
        int fr = 0, fd = 0;
        double fv = 0;
        if (sscanf(getenv("EMU_FLIP"), "%d %d %lf", &fr, &fd, &fv) != 3 || fr < 0 || fr >= D.nrows || fd < 0 ||
            fd >= D.hd) {
            fprintf(stderr, "EMU_FLIP: \"row channel value\"\n");
            return 2;
        }
        const double dv = fv - D.rows[(size_t)fr * D.hd + fd];
        int64_t bad = 0;
        double worst = 0, wold = 0, wnew = 0;
        int wt = -1, wh = -1;
        for (int t = 0; t < D.s; t++) {
            bool sees = false;
            for (int j = 0; j < D.topk; j++)
                sees |= D.idx[(size_t)t * D.topk + j] == fr;
            if (!sees)
                continue;
            for (int h = 0; h < D.nh; h++) {
                std::vector<double> o64;
                std::vector<std::pair<int, double>> probs;
                double zmax = 0, pmax = 0;
                int nvalid = 0;
                attend64(D, t, h, o64, zmax, pmax, nvalid, &probs);
                double p = 0;
                for (auto &[r, pr] : probs)
                    if (r == fr)
                        p += pr;
                const double want = D.o[((size_t)t * D.nh + h) * D.hd + fd];
                const double err = fabs(as_bf16((float)(want + p * dv)) - want);
                bad += err > tol;
                if (err > worst)
                    worst = err, wt = t, wh = h, wold = want, wnew = as_bf16((float)(want + p * dv));
            }
        }
        printf("flip kv[%d][%d] %.6g -> %.6g: %lld elements of o beyond tol %.4g, worst %.4g at token %d head %d "
               "channel %d (o %.6g -> %.6g)\n",
               fr, fd, D.rows[(size_t)fr * D.hd + fd], fv, (long long)bad, tol, worst, wt, wh, fd, wold, wnew);
        return 0;
    }
    printf("dump: s %d nh %d hd %d rows %d (na %d) topk %d; max|o| %.4g -> tol %.4g; max|q| %.4g max|row| %.4g; "
           "sink in [%.4g, %.4g]; mma splits %d\n",
           D.s, nh, hd, D.nrows, D.na, topk, maxw, tol, qmax, rmax, smin, smax, split);

    std::vector<uint16_t> rb((size_t)D.nrows * hd + 8);
    for (size_t i = 0; i < (size_t)D.nrows * hd; i++) rb[i] = as_bf16_bits(D.rows[i]);
    emu::smem_base = smem;
    const float scale = (float)(1.0 / sqrt((double)hd));
    int fails = 0;
    for (int t : ts) {
        std::vector<uint16_t> qb((size_t)nh * hd), om((size_t)nh * hd, 0x7f7f), ow((size_t)nh * hd, 0x7f7f);
        for (size_t i = 0; i < qb.size(); i++) qb[i] = as_bf16_bits(D.q[(size_t)t * nh * hd + i]);
        const int32_t *sel = &D.idx[(size_t)t * topk];
        AttnArgs a{qb.data(), rb.data(), D.na, rb.data() + (size_t)D.na * hd, D.nrows - D.na, sel, topk,
                   D.sink.data(), om.data(), nh, scale, 1, nullptr, nullptr};
        switch (hd) {
        case 64: run_mma<64>(a, split, nh); break;
        case 128: run_mma<128>(a, split, nh); break;
        case 256: run_mma<256>(a, split, nh); break;
        case 512: run_mma<512>(a, split, nh); break;
        default: fprintf(stderr, "hd %d: no tensor-core kernel\n", hd); return 2;
        }
        a.o = ow.data();
        emu::launch(dim3((unsigned)((nh + 3) / 4)), dim3(128), [&] { sparse_attn_warp_kernel(a, 1, hd); });
        int nbad_m = 0, nbad_w = 0;
        double fs_max = 0; // largest change of one o element that one benign kv flip can cause
        int fs_over = 0;   // o elements where that change exceeds the tolerance
        double em = 0, ew = 0, er = 0;
        int wh = -1, wd = -1;
        for (int h = 0; h < nh; h++) {
            std::vector<double> o64;
            double zmax = 0, pmax = 0;
            int nvalid = 0;
            std::vector<std::pair<int, double>> probs;
            attend64(D, t, h, o64, zmax, pmax, nvalid, &probs);
            if (!flip.empty())
                for (int d = 0; d < hd; d++) {
                    double sd = 0;
                    for (auto &[r, p] : probs)
                        sd = fmax(sd, p * flip[(size_t)r * hd + d]);
                    fs_max = fmax(fs_max, sd);
                    fs_over += sd > tol;
                }
            int hb_m = 0, hb_w = 0;
            double hm = 0, hw = 0, hr = 0;
            int hdm = 0;
            for (int d = 0; d < hd; d++) {
                const size_t i = (size_t)h * hd + d;
                const double want = D.o[(size_t)t * nh * hd + i];
                const double gm = as_bf16_to_f32(om[i]), gw = as_bf16_to_f32(ow[i]);
                const double xm = std::isnan(gm) ? INFINITY : fabs(gm - want);
                const double xw = std::isnan(gw) ? INFINITY : fabs(gw - want);
                if (xm > hm) hm = xm, hdm = d;
                hw = fmax(hw, xw);
                hr = fmax(hr, fabs(want - o64[d]));
                hb_m += !(xm <= tol), hb_w += !(xw <= tol);
            }
            if (hb_m || hb_w || hm > 0.5 * tol)
                printf("  t %d h %2d: %d valid, zmax %.4g sink %.4g pmax %.4f | mma err %.4g (%.2f tol, %d bad, d %d: "
                       "got %.6g want %.6g f64 %.6g) | warp err %.4g (%d bad) | ref-f64 %.3g\n",
                       t, h, nvalid, zmax, D.sink[h], pmax, hm, hm / tol, hb_m, hdm,
                       as_bf16_to_f32(om[(size_t)h * hd + hdm]), D.o[((size_t)t * nh + h) * hd + hdm], o64[hdm], hw,
                       hb_w, hr);
            nbad_m += hb_m, nbad_w += hb_w;
            if (hm > em) em = hm, wh = h, wd = hdm;
            ew = fmax(ew, hw), er = fmax(er, hr);
        }
        if (getenv("EMU_SHOW")) { // "h d": that element of both kernels, the reference and f64
            int sh = 0, sd = 0;
            if (sscanf(getenv("EMU_SHOW"), "%d %d", &sh, &sd) == 2 && sh >= 0 && sh < nh && sd >= 0 && sd < hd) {
                std::vector<double> o64;
                double zmax = 0, pmax = 0;
                int nvalid = 0;
                std::vector<std::pair<int, double>> probs;
                attend64(D, t, sh, o64, zmax, pmax, nvalid, &probs);
                const size_t i = (size_t)sh * hd + sd;
                if (!flip.empty())
                    for (auto &[r, p] : probs)
                        if (p * flip[(size_t)r * hd + sd] > 0.25 * tol)
                            printf("    row %d: p %.4f, kv_pre %.6g -> kv %.6g; a 1-ulp move before fp8 changes kv by "
                                   "%.4g: o by %.4g (%.2f tol)\n",
                                   r, p, D.kv_pre[(size_t)r * hd + sd], D.rows[(size_t)r * hd + sd],
                                   flip[(size_t)r * hd + sd], p * flip[(size_t)r * hd + sd],
                                   p * flip[(size_t)r * hd + sd] / tol);
                printf("  t %d h %d d %d: mma %.6g warp %.6g ref %.6g f64 %.6g (%d valid, zmax %.4g, sink %.4g, pmax "
                       "%.4f)\n",
                       t, sh, sd, as_bf16_to_f32(om[i]), as_bf16_to_f32(ow[i]), D.o[(size_t)t * nh * hd + i], o64[sd],
                       nvalid, zmax, D.sink[sh], pmax);
            }
        }
        printf("%s t %3d: mma max err %.4g = %.3f tol (h %d d %d), %d bad | warp max err %.4g = %.3f tol, %d bad | "
               "ref vs f64 %.3g\n",
               nbad_m || nbad_w ? "FAIL" : "ok  ", t, em, em / tol, wh, wd, nbad_m, ew, ew / tol, nbad_w, er);
        if (!flip.empty())
            printf("      t %3d: one benign fp8 flip of a window row (1 bf16 ulp before the quantiser) moves o by up to "
                   "%.4g = %.2f tol; %d elements of o could leave the tolerance that way\n",
                   t, fs_max, fs_max / tol, fs_over);
        fflush(stdout);
        fails += nbad_m || nbad_w;
    }
    return fails != 0;
}
