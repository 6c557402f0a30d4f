/* SPEC section 6: one layer's run (got) against the reference (want), tensor by tensor.
 * Values: max|got - want| <= max|want| * rel + abs, with quantisation flips set apart.
 * Selections: exact; each differing query is explained as a near-tie or called a real
 * mismatch from the index scores of both sides. */
#include "driver/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/cancel.h"
#include "ref/candidates.h"
#include "ref/indexer.h"
#include "ref/linear.h"
#include "ref/numerics.h"
#include "ref/quant.h"

const char *as_verdict_name(AsVerdict v)
{
    static const char *const names[AS_V_COUNT] = {
        [AS_V_NOT_RUN] = "not-run",     [AS_V_ABSENT] = "absent",       [AS_V_PASS] = "pass",
        [AS_V_FLIPS] = "flips",         [AS_V_NEAR_TIE] = "near-tie",   [AS_V_TIE_ORDER] = "tie-order",
        [AS_V_INHERITED] = "inherited", [AS_V_MISMATCH] = "MISMATCH",
    };
    return (unsigned)v < AS_V_COUNT ? names[v] : "?";
}

bool as_verdict_ok(AsVerdict v)
{
    return v == AS_V_PASS || v == AS_V_FLIPS || v == AS_V_NEAR_TIE || v == AS_V_TIE_ORDER || v == AS_V_INHERITED ||
           v == AS_V_ABSENT;
}

const char *as_cause_name(AsCause c)
{
    static const char *const names[AS_CAUSE_COUNT] = {
        [AS_CAUSE_NONE] = "none",           [AS_CAUSE_FLIP] = "flip",           [AS_CAUSE_NEAR_TIE] = "near-tie",
        [AS_CAUSE_TIE_ORDER] = "tie-order", [AS_CAUSE_INHERITED] = "inherited", [AS_CAUSE_REAL] = "real",
    };
    return (unsigned)c < AS_CAUSE_COUNT ? names[c] : "?";
}

static int first_fit(AsTieFit fit)
{
    for (int i = 0; i < AS_TIES_COUNT; i++)
        if (fit & (1u << i))
            return i;
    return -1;
}

const char *as_tie_fit_what(AsTieFit fit)
{
    int i = first_fit(fit);
    return i < 0 ? "none of cpu, lowest, highest" : as_tie_order_what((AsTieOrder)i);
}

const char *as_tie_fit_name(AsTieFit fit)
{
    int i = first_fit(fit);
    return i < 0 ? "none" : as_tie_order_name((AsTieOrder)i);
}

void as_compare_options_default(AsCompareOptions *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < AS_T_COUNT; i++)
        o->tol[i] = AS_TOL_DEFAULT;
    /* o->quantised: see "quantised projections" below */
    o->cand_block = 0;
}

/* ---- quantised projections (SPEC 6, last item; the derivation is in docs/GGUF.md) ----------
 * With Q2_K / Q8_0 projections the engine rounds each projection's input to q8_1 (per 32 values
 * d = amax / 127, |error| <= d / 2 = amax / 254), the reference does not. A tensor downstream of
 * such a projection gets Q_REL added to its relative tolerance: the rms relative error of one
 * q8_1 dot product on unit-variance inputs is at most (3.5 / 127) / sqrt(12) = 0.0080, times 2
 * for the peak-to-rms of max|diff| against max|want|, times 2 for the four quantised projections
 * in a row (wq_a, wq_b, wo_a, wo_b) adding in quadrature. Selection boundaries (near-ties) and a
 * quantiser's inputs (benign flips) are allowed Q_ULPS bf16 ulps instead of 1 (Q_REL is about 8
 * ulps of 2^-8 at the top of a binade). */
#define Q_REL 0.032
#define Q_ULPS 8

/* Whether tensor id of this layer follows a quantised projection: all but the layer input and
 * the ratio-2 compressor's f32 path (its weights are F32, the engine does not quantise x there),
 * unless the two sides' inputs differ (free mode), when the whole layer is downstream of the
 * earlier layers' projections. */
static bool q_downstream(const AsRun *got, const AsRun *want, AsTensorId id)
{
    switch (id) {
    case AS_T_X:
    case AS_T_ST_PART_KV:
    case AS_T_ST_PART_SC:
        break;
    case AS_T_LATENT:
    case AS_T_LATENT_PRE:
    case AS_T_LATENT_Q:
    case AS_T_ROWS_B:
    case AS_T_ST_CCACHE:
        if (want->ratio != 2)
            return true;
        break;
    default:
        return true;
    }
    const AsHostTensor *gx = &got->t[AS_T_X], *wx = &want->t[AS_T_X];
    if (!gx->data || !wx->data || as_ht_numel(gx) != as_ht_numel(wx))
        return false;
    return memcmp(gx->data, wx->data, (size_t)as_ht_numel(wx) * sizeof(float)) != 0;
}

/* bf16 bit patterns on one ordered integer line: +0 and -0 both map to 0. */
static int64_t bf16_order(float x)
{
    uint16_t b = as_bf16_bits(x);
    return (b & 0x8000u) ? -(int64_t)(b & 0x7fffu) : (int64_t)b;
}

int64_t as_bf16_ulp_distance(float a, float b)
{
    if (isnan(a) || isnan(b))
        return (isnan(a) && isnan(b)) ? 0 : INT64_MAX;
    int64_t d = bf16_order(a) - bf16_order(b);
    return d < 0 ? -d : d;
}

void as_format_coord(AsTensorId id, const int64_t coord[3], int ndim, char *buf, int n)
{
    if (n <= 0)
        return;
    buf[0] = '\0';
    int used = 0;
    for (int i = 0; i < ndim && i < 3 && used < n; i++) {
        const char *dim = (unsigned)id < AS_T_COUNT && as_tensor_desc[id].dims[i] ? as_tensor_desc[id].dims[i] : "dim";
        used += snprintf(buf + used, (size_t)(n - used), "%s%s %lld", i ? ", " : "", dim, (long long)coord[i]);
    }
}

static void unravel(const AsHostTensor *t, int64_t i, int64_t coord[3])
{
    coord[0] = coord[1] = coord[2] = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d] > 0 ? t->shape[d] : 1;
        coord[d] = i % n;
        i /= n;
    }
}

static double val(const AsHostTensor *t, int64_t i)
{
    switch (t->type) {
    case AS_VT_I32: return ((const int32_t *)t->data)[i];
    case AS_VT_U8: return ((const uint8_t *)t->data)[i];
    default: return ((const float *)t->data)[i];
    }
}

static bool same_shape(const AsHostTensor *a, const AsHostTensor *b)
{
    if (a->ndim != b->ndim || a->type != b->type)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* ---- quantisation flips ---------------------------------------------------------------- */

static int qz_block(AsQuantKind q)
{
    return q == AS_QZ_FP8 ? AS_FP8_BLOCK : q == AS_QZ_FP4_E8M0 ? AS_FP4_E8M0_BLOCK : AS_FP4_E4M3_BLOCK;
}

static float qz_scale(AsQuantKind q, const float *x, int n)
{
    return q == AS_QZ_FP8 ? as_fp8_block_scale(x, n)
           : q == AS_QZ_FP4_E8M0 ? as_fp4_e8m0_block_scale(x, n)
                                 : as_fp4_e4m3_block_scale(x, n);
}

static double qz_grid_max(AsQuantKind q) { return q == AS_QZ_FP8 ? 448.0 : 6.0; }

/* Whether v is exactly a grid point times s (values leave the quantiser exact in bf16). */
static bool on_grid(AsQuantKind q, double v, double s)
{
    if (!(s > 0) || !isfinite(s))
        return false;
    double y = v / s;
    if (fabs(y) > qz_grid_max(q))
        return false;
    float yf = (float)y;
    if ((double)yf != y)
        return false;
    return q == AS_QZ_FP8 ? as_e4m3(yf) == yf : as_e2m1(yf) == yf;
}

/* The distance from magnitude m to the next grid point above it, on the grid of scale s:
 * e4m3 has 3 mantissa bits (subnormal step 2^-9); e2m1 is {0, .5, 1, 1.5, 2, 3, 4, 6}. */
static double grid_step(AsQuantKind q, double m, double s)
{
    double y = m / s;
    if (q == AS_QZ_FP8) {
        if (y < 0x1p-6)
            return 0x1p-9 * s;
        int e;
        frexp(y, &e);
        return ldexp(1.0, e - 4) * s;
    }
    return (y < 2 ? 0.5 : y < 4 ? 1.0 : 2.0) * s;
}

/* Scales one step apart: powers of two (ue8m0) differ by 2x; e4m3 scales by one code. */
static bool scale_adjacent(AsQuantKind q, double a, double b)
{
    if (a == b)
        return true;
    if (!(a > 0) || !(b > 0))
        return false;
    if (q == AS_QZ_FP4_E4M3) {
        int ca = as_e4m3_bits((float)a), cb = as_e4m3_bits((float)b);
        return abs(ca - cb) <= 1;
    }
    return fmax(a, b) == 2 * fmin(a, b);
}

/* A side's block scale as a range [lo, hi]: exact from the pre-quantisation block; derived
 * from the quantised block itself, a power-of-two scale whose block sits at the top of the
 * grid may really be twice as large (amax just above half a scale step rounds down), so the
 * range then holds both. */
typedef struct {
    double lo, hi;
} ScaleRange;

static ScaleRange side_scale(AsQuantKind q, const float *block, int n, bool derived)
{
    double s = qz_scale(q, block, n);
    ScaleRange r = {s, s};
    if (derived && q != AS_QZ_FP4_E4M3) {
        double amax = 0;
        for (int i = 0; i < n; i++)
            amax = fmax(amax, fabs(block[i]));
        if (amax == qz_grid_max(q) * s)
            r.hi = 2 * s;
    }
    return r;
}

/* SPEC 6 benign flip of element i of a quantised tensor: (a) its pre-quantisation inputs,
 * when both sides have the twin, within one bf16 ulp -- or, a documented widening, within the
 * bf16 rule of the pre-quantisation tensor itself (pre_tol: on the GPU a different summation
 * order before RMSNorm and RoPE moves a pre-input by 2-3 ulps while that tensor passes; *wide
 * says this case was used); (b) both outputs on their side's grid, the block scales equal or
 * adjacent, and at most one step of the coarser grid apart. */
static bool is_flip(const AsRun *got, const AsRun *want, AsTensorId id, int64_t i, int near_ulps, double pre_tol,
                    bool *wide)
{
    const AsTensorDesc *d = &as_tensor_desc[id];
    const AsHostTensor *g = &got->t[id], *w = &want->t[id];
    if (g->type != AS_VT_BF16 && g->type != AS_VT_F32)
        return false;
    int64_t last = g->shape[g->ndim - 1];
    if (last <= 0)
        return false;
    /* the element's block: block channels along the last dim, a short last block on its own */
    int bs = qz_block(d->quant);
    int64_t c0 = (i % last) / bs * bs, b0 = i - i % last + c0;
    int len = (int)(last - c0 < bs ? last - c0 : bs);
    const float *gv = g->data, *wv = w->data;

    const AsHostTensor *gp = d->pre != AS_T_COUNT ? &got->t[d->pre] : NULL;
    const AsHostTensor *wp = d->pre != AS_T_COUNT ? &want->t[d->pre] : NULL;
    bool have_pre = gp && wp && gp->data && wp->data && same_shape(gp, g) && same_shape(wp, w);
    ScaleRange sg, sw;
    if (have_pre) {
        const float *gpv = gp->data, *wpv = wp->data;
        if (as_bf16_ulp_distance(gpv[i], wpv[i]) > near_ulps) {
            if (!(fabs((double)gpv[i] - wpv[i]) <= pre_tol))
                return false;
            *wide = true;
        }
        sg = side_scale(d->quant, gpv + b0, len, false);
        sw = side_scale(d->quant, wpv + b0, len, false);
    } else {
        /* no twin (rows_a, rows_b, cache states): each side's scale from its own output block */
        sg = side_scale(d->quant, gv + b0, len, true);
        sw = side_scale(d->quant, wv + b0, len, true);
    }
    double a = gv[i], b = wv[i];
    if (!on_grid(d->quant, a, sg.lo) || !on_grid(d->quant, b, sw.lo))
        return false;
    if (!(scale_adjacent(d->quant, sg.lo, sw.lo) || scale_adjacent(d->quant, sg.hi, sw.lo) ||
          scale_adjacent(d->quant, sg.lo, sw.hi) || scale_adjacent(d->quant, sg.hi, sw.hi)))
        return false;
    double m = fmin(fabs(a), fabs(b));
    double step = fmax(grid_step(d->quant, m, sg.hi), grid_step(d->quant, m, sw.hi));
    return fabs(a - b) <= step;
}

/* ---- values ---------------------------------------------------------------------------- */

/* The bf16 rule's bound for the pre-quantisation twin of tensor id (0 when there is none). */
static double pre_tolerance(const AsRun *want, AsTensorId id, AsTolerance tol)
{
    AsTensorId pre = as_tensor_desc[id].pre;
    if (pre == AS_T_COUNT || !want->t[pre].data)
        return 0;
    const AsHostTensor *p = &want->t[pre];
    double m = 0;
    for (int64_t i = 0; i < as_ht_numel(p); i++) {
        double v = fabs(val(p, i));
        if (isfinite(v) && v > m)
            m = v;
    }
    return m * tol.rel + tol.abs;
}

/* One chunk's share of a comparison: counts, and its first element of the largest difference. */
typedef struct {
    int64_t n_flips, n_flips_wide, n_bad, worst;
    double max_abs;
} ValueChunk;

enum { VALUE_CHUNK = 1 << 16 }; /* elements a chunk; a cancel is seen once a chunk */

/* The end of chunk k of nch chunks of len elements over n (the last takes the rest). */
static int64_t chunk_end(int64_t k, int64_t nch, int64_t len, int64_t n) { return k + 1 == nch ? n : (k + 1) * len; }

static double elem_diff(double a, double b)
{
    if (isnan(a) || isnan(b))
        return (isnan(a) && isnan(b)) ? 0 : INFINITY;
    return a == b ? 0 : fabs(a - b); /* also -inf == -inf; inf when only one side is infinite */
}

/* The comparison of elements [i0, i1): an element beyond tol is a flip or bad; the worst is the first
 * of the largest difference among the elements that are not flips. */
static void compare_chunk(const AsRun *got, const AsRun *want, AsTensorId id, double tol, bool quantised,
                          int near_ulps, double pre_tol, int64_t i0, int64_t i1, ValueChunk *c)
{
    const AsHostTensor *g = &got->t[id], *w = &want->t[id];
    *c = (ValueChunk){.worst = -1};
    for (int64_t i = i0; i < i1; i++) {
        double diff = elem_diff(val(g, i), val(w, i));
        if (diff > tol) {
            bool wide = false;
            if (quantised && isfinite(diff) && is_flip(got, want, id, i, near_ulps, pre_tol, &wide)) {
                c->n_flips++;
                c->n_flips_wide += wide;
                continue;
            }
            c->n_bad++;
        }
        if (diff > c->max_abs) {
            c->max_abs = diff;
            c->worst = i;
        }
    }
}

/* Every element against the tolerance, the chunks on all threads; merged in order, so the counts and
 * the worst element (the first of the largest difference) are the sequential loop's. */
static void compare_values(const AsRun *got, const AsRun *want, AsTensorId id, AsTolerance tol, int near_ulps,
                           AsTensorDiff *out)
{
    const AsHostTensor *g = &got->t[id], *w = &want->t[id];
    const int64_t n = out->numel, nc = (n + VALUE_CHUNK - 1) / VALUE_CHUNK;
    ValueChunk one, *ch = nc > 1 ? malloc(sizeof *ch * (size_t)nc) : &one;
    if (!ch) /* out of memory for the chunks' results: one chunk, one thread */
        ch = &one;
    const int64_t nch = ch == &one ? 1 : nc, len = nch == 1 ? n : VALUE_CHUNK;
    double want_max = 0;
#pragma omp parallel for schedule(static) num_threads(as_ref_threads()) reduction(max : want_max) if (nch > 1)
    for (int64_t k = 0; k < nch; k++) {
        if (as_ref_cancelled()) /* a layer's comparison stops with a cancel (ref/cancel.h) */
            continue;
        const int64_t i1 = chunk_end(k, nch, len, n);
        for (int64_t i = k * len; i < i1; i++) {
            double v = fabs(val(w, i));
            if (isfinite(v) && v > want_max)
                want_max = v; /* -inf index scores must not make the tolerance infinite */
        }
    }
    out->want_max = want_max;
    out->tol = want_max * tol.rel + tol.abs;
    bool quantised = as_tensor_desc[id].quant != AS_QZ_NONE;
    double pre_tol = quantised ? pre_tolerance(want, id, tol) : 0;
#pragma omp parallel for schedule(dynamic, 4) num_threads(as_ref_threads()) if (nch > 1)
    for (int64_t k = 0; k < nch; k++) {
        if (as_ref_cancelled()) {
            ch[k] = (ValueChunk){.worst = -1};
            continue;
        }
        compare_chunk(got, want, id, out->tol, quantised, near_ulps, pre_tol, k * len, chunk_end(k, nch, len, n), &ch[k]);
    }
    for (int64_t k = 0; k < nch; k++) {
        out->n_flips += ch[k].n_flips;
        out->n_flips_wide += ch[k].n_flips_wide;
        out->n_bad += ch[k].n_bad;
        if (ch[k].worst >= 0 && ch[k].max_abs > out->max_abs) {
            out->max_abs = ch[k].max_abs;
            out->worst = ch[k].worst;
        }
    }
    if (ch != &one)
        free(ch);
    if (out->worst >= 0) {
        unravel(w, out->worst, out->worst_coord);
        out->worst_got = val(g, out->worst);
        out->worst_want = val(w, out->worst);
        out->worst_ulp = as_bf16_ulp_distance((float)out->worst_got, (float)out->worst_want);
    }
    out->max_rel = want_max > 0 ? out->max_abs / want_max : out->max_abs > 0 ? INFINITY : 0;
    out->verdict = out->n_bad ? AS_V_MISMATCH : out->n_flips ? AS_V_FLIPS : AS_V_PASS;
    out->cause = out->n_bad ? AS_CAUSE_REAL : out->n_flips ? AS_CAUSE_FLIP : AS_CAUSE_NONE;
}

/* ---- selections ------------------------------------------------------------------------ */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}
static int cmp_i32_s(const void *a, const void *b) { return cmp_i32(a, b); }

static int cmp_desc_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The symmetric difference of two index rows as sets (entries < 0 mean nothing), into sd. */
static void index_set_diff(const int32_t *g, const int32_t *w, int64_t n, int32_t *tmp, AsSelDiff *sd,
                           int32_t *all, int64_t *n_all)
{
    int32_t *a = tmp, *b = tmp + n;
    int64_t na = 0, nb = 0;
    for (int64_t i = 0; i < n; i++) {
        if (g[i] >= 0)
            a[na++] = g[i];
        if (w[i] >= 0)
            b[nb++] = w[i];
    }
    qsort(a, (size_t)na, sizeof *a, cmp_i32);
    qsort(b, (size_t)nb, sizeof *b, cmp_i32);
    int64_t i = 0, j = 0;
    *n_all = 0;
    while (i < na || j < nb) {
        if (j >= nb || (i < na && a[i] < b[j])) {
            if (sd->n_only_got < 8)
                sd->only_got[sd->n_only_got] = a[i];
            sd->n_only_got++;
            all[(*n_all)++] = a[i++];
        } else if (i >= na || b[j] < a[i]) {
            if (sd->n_only_want < 8)
                sd->only_want[sd->n_only_want] = b[j];
            sd->n_only_want++;
            all[(*n_all)++] = b[j++];
        } else {
            i++, j++;
        }
    }
}

/* One side's index scores row t, or NULL when the scores cannot explain anything. */
static const float *score_row(const AsRun *r, int64_t t, int64_t *width)
{
    const AsHostTensor *s = &r->t[AS_T_ISCORE];
    if (!s->data || s->ndim != 2 || t >= s->shape[0] || s->shape[1] <= 0)
        return NULL;
    *width = s->shape[1];
    const float *row = (const float *)s->data + t * s->shape[1];
    for (int64_t i = 0; i < *width; i++)
        if (isnan(row[i]))
            return NULL;
    return row;
}

/* Identical score rows under different selections is a real mismatch: tie order is
 * deterministic, so only differing inputs may explain differing outputs. */
static bool rows_identical(const float *a, int64_t na, const float *b, int64_t nb)
{
    return na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

static void note_ulp(double *margin, int64_t u)
{
    double m = u == INT64_MAX ? INFINITY : (double)u;
    if (m > *margin)
        *margin = m;
}

/* How a differing query of a selection is explained. */
typedef enum { SEL_REAL, SEL_NEAR_TIE, SEL_TIE_ORDER } SelWhy;

/* Compressed selection entries (values p + rows_a_len) in the symmetric difference, judged by the
 * index scores of each side: a tie-order difference when, on both sides, each one scores exactly that
 * side's k-th largest score of the row (SPEC 5, 6: which of equal scores a top-k keeps is its
 * convention); a near-tie when each one is within one bf16 ulp of it (and the rows differ: identical
 * rows under different selections are real, the tie order being deterministic). A side that stores no
 * scores (a partial dump) is judged by the reference's, standing in for its own. Fills the margin
 * (the largest ulp distance to a boundary). */
static SelWhy explain_compressed(const AsRun *got, const AsRun *want, int64_t t, const int32_t *vals, int64_t nv,
                                 int near_ulps, double *margin)
{
    int64_t wg = 0, ww = 0;
    const float *rw = score_row(want, t, &ww), *rg = score_row(got, t, &wg);
    if (!rw)
        return SEL_REAL;
    const AsRun *gs = got;
    bool stand_in = !rg;
    if (stand_in)
        rg = rw, wg = ww, gs = want;
    bool identical = !stand_in && rows_identical(rg, wg, rw, ww);
    const AsRun *side[2] = {gs, want};
    const float *row[2] = {rg, rw};
    int64_t width[2] = {wg, ww};
    bool ok = true, exact = true;
    for (int s = 0; s < 2; s++) {
        int k = side[s]->k;
        if (k <= 0 || k > width[s])
            return SEL_REAL;
        float *tmp = malloc((size_t)width[s] * sizeof *tmp);
        if (!tmp)
            return SEL_REAL;
        memcpy(tmp, row[s], (size_t)width[s] * sizeof *tmp);
        qsort(tmp, (size_t)width[s], sizeof *tmp, cmp_desc_f);
        float boundary = tmp[k - 1];
        free(tmp);
        for (int64_t i = 0; i < nv; i++) {
            int64_t p = (int64_t)vals[i] - side[s]->rows_a_len;
            if (p < 0 || p >= width[s]) {
                ok = false;
                continue;
            }
            int64_t u = as_bf16_ulp_distance(row[s][p], boundary);
            note_ulp(margin, u);
            if (u > 0)
                exact = false;
            if (u > near_ulps)
                ok = false;
        }
    }
    if (ok && exact)
        return SEL_TIE_ORDER;
    return ok && !identical ? SEL_NEAR_TIE : SEL_REAL;
}

static int cmp_i32_s(const void *a, const void *b);

/* Which tie conventions give the checked side's compressed row (k entries: p + offset, -1 for a pick
 * at or beyond the query's visible length) from the scores it is judged by. */
static AsTieFit fit_compressed(const AsRun *got, const AsRun *want, int64_t t, const int32_t *gsel, int64_t k)
{
    int64_t w = 0;
    const float *row = score_row(got, t, &w);
    if (!row)
        row = score_row(want, t, &w);
    if (!row || k <= 0 || k > w || want->ratio <= 0)
        return 0;
    int32_t *mine = malloc(sizeof(int32_t) * (size_t)k * 2);
    if (!mine)
        return 0;
    int32_t *cand = mine + k;
    memcpy(mine, gsel, sizeof(int32_t) * (size_t)k);
    qsort(mine, (size_t)k, sizeof *mine, cmp_i32_s);
    int cl = want->start_pos == 0 ? (int)((t + 1) / want->ratio) : (int)w;
    AsTieFit fit = 0;
    for (int c = 0; c < AS_TIES_COUNT; c++) {
        if (as_index_topk_ties(row, 1, (int)w, (int)k, &cl, want->rows_a_len, cand, (AsTieOrder)c))
            continue;
        qsort(cand, (size_t)k, sizeof *cand, cmp_i32_s);
        if (!memcmp(cand, mine, sizeof(int32_t) * (size_t)k))
            fit |= (AsTieFit)(1u << c);
    }
    free(mine);
    return fit;
}

/* Candidate mask row t: blocks kept on one side only are a tie-order difference when, on both sides,
 * their block maximum equals the weakest kept block's (the k-th largest block maximum when nothing was
 * dropped), a near-tie when within one bf16 ulp of it. The newest visible block is pinned to +inf. A
 * side without scores is judged by the reference's. */
static SelWhy explain_cand(const AsRun *got, const AsRun *want, int64_t t, int bs, int near_ulps, double *margin)
{
    if (bs <= 0)
        return SEL_REAL;
    int64_t wg = 0, ww = 0;
    const float *rg = score_row(got, t, &wg), *rw = score_row(want, t, &ww);
    bool stand_in = !rg;
    if (stand_in)
        rg = rw, wg = ww;
    if (!rg || !rw || wg != ww)
        return SEL_REAL;
    bool identical = !stand_in && rows_identical(rg, wg, rw, ww);
    int64_t width = wg, nb = (width + bs - 1) / bs;
    const AsRun *side[2] = {got, want};
    const float *row[2] = {rg, rw};
    float *bmax = malloc((size_t)nb * 2 * sizeof *bmax);
    uint8_t *kept = malloc((size_t)nb * 2);
    if (!bmax || !kept) {
        free(bmax);
        free(kept);
        return SEL_REAL;
    }
    bool ok = true, exact = true;
    float boundary[2];
    for (int s = 0; s < 2 && ok; s++) {
        const AsRun *r = side[s];
        const AsHostTensor *c = &r->t[AS_T_CAND];
        if (!c->data || c->ndim != 2 || c->shape[1] != width || want->ratio <= 0) {
            ok = false;
            break;
        }
        const uint8_t *mask = (const uint8_t *)c->data + t * width;
        int64_t cl = want->start_pos == 0 ? (t + 1) / want->ratio : width;
        int64_t pinned = cl >= 1 ? (cl - 1) / bs : -1; /* floor division: cl == 0 pins nothing */
        boundary[s] = INFINITY;
        bool any = false;
        for (int64_t b = 0; b < nb; b++) {
            int64_t lo = b * bs, hi = lo + bs < width ? lo + bs : width;
            float m = -INFINITY;
            for (int64_t p = lo; p < hi; p++) {
                m = fmaxf(m, row[s][p]);
                if ((mask[p] != 0) != (mask[lo] != 0))
                    ok = false; /* a block kept in part: not what the selection produces */
            }
            bmax[s * nb + b] = b == pinned ? INFINITY : m;
            kept[s * nb + b] = mask[lo] != 0;
            if (kept[s * nb + b]) {
                any = true;
                if (bmax[s * nb + b] < boundary[s])
                    boundary[s] = bmax[s * nb + b];
            }
        }
        if (!any)
            ok = false;
    }
    for (int64_t b = 0; b < nb && ok; b++) {
        if (kept[b] == kept[nb + b])
            continue;
        for (int s = 0; s < 2; s++) {
            int64_t u = as_bf16_ulp_distance(bmax[s * nb + b], boundary[s]);
            note_ulp(margin, u);
            if (u > 0)
                exact = false;
            if (u > near_ulps)
                ok = false;
        }
    }
    free(bmax);
    free(kept);
    if (ok && exact)
        return SEL_TIE_ORDER;
    return ok && !identical ? SEL_NEAR_TIE : SEL_REAL;
}

/* Which tie conventions give the checked side's candidate mask row from the scores it is judged by. */
static AsTieFit fit_cand(const AsRun *got, const AsRun *want, int64_t t, const uint8_t *gmask, int bs, int topk_blocks)
{
    int64_t w = 0;
    const float *row = score_row(got, t, &w);
    if (!row)
        row = score_row(want, t, &w);
    if (!row || bs <= 0 || topk_blocks <= 0 || want->ratio <= 0)
        return 0;
    uint8_t *m = malloc((size_t)w);
    if (!m)
        return 0;
    int cl = want->start_pos == 0 ? (int)((t + 1) / want->ratio) : (int)w;
    AsTieFit fit = 0;
    for (int c = 0; c < AS_TIES_COUNT; c++)
        if (!as_select_candidate_blocks_ties(row, 1, (int)w, &cl, bs, topk_blocks, m, (AsTieOrder)c) &&
            !memcmp(m, gmask, (size_t)w))
            fit |= (AsTieFit)(1u << c);
    free(m);
    return fit;
}

static void compare_selection(const AsRun *got, const AsRun *want, AsTensorId id, const AsCompareOptions *opt,
                              AsTensorDiff *out)
{
    const int near_ulps = opt->quantised ? Q_ULPS : 1;
    const AsHostTensor *g = &got->t[id], *w = &want->t[id];
    int64_t rows = w->ndim ? w->shape[0] : 0;
    int64_t rlen = rows > 0 ? out->numel / rows : 0;
    size_t esz = w->type == AS_VT_U8 ? 1 : 4;
    /* two sorted copies of the row, then the symmetric difference (at most both rows) */
    int32_t *tmp = malloc((size_t)(rlen > 0 ? rlen : 1) * 4 * sizeof *tmp);
    if (!tmp) {
        out->verdict = AS_V_MISMATCH; /* cannot say why: report the difference as real */
        out->cause = AS_CAUSE_REAL;
        out->n_real = out->n_rows_differ = 1;
        return;
    }
    for (int64_t t = 0; t < rows; t++) {
        const char *gr = (const char *)g->data + (size_t)(t * rlen) * esz;
        const char *wr = (const char *)w->data + (size_t)(t * rlen) * esz;
        if (memcmp(gr, wr, (size_t)rlen * esz) == 0)
            continue;
        out->n_rows_differ++;
        for (int64_t c = 0; c < rlen; c++) {
            if (val(g, t * rlen + c) != val(w, t * rlen + c)) {
                if (out->worst < 0) {
                    out->worst = t * rlen + c;
                    unravel(w, out->worst, out->worst_coord);
                    out->worst_got = val(g, out->worst);
                    out->worst_want = val(w, out->worst);
                }
                out->n_bad++;
            }
        }
        AsSelDiff sd = {.query = t};
        SelWhy why = SEL_REAL;
        AsTieFit fit = 0;
        if (id == AS_T_CAND) {
            const uint8_t *a = (const uint8_t *)gr, *b = (const uint8_t *)wr;
            for (int64_t c = 0; c < rlen; c++) {
                if (a[c] && !b[c] && sd.n_only_got++ < 8)
                    sd.only_got[sd.n_only_got - 1] = (int32_t)c;
                if (!a[c] && b[c] && sd.n_only_want++ < 8)
                    sd.only_want[sd.n_only_want - 1] = (int32_t)c;
            }
            why = explain_cand(got, want, t, opt->cand_block, near_ulps, &sd.margin);
            if (why == SEL_TIE_ORDER)
                fit = fit_cand(got, want, t, a, opt->cand_block, opt->cand_topk_blocks);
        } else {
            const int32_t *a = (const int32_t *)gr, *b = (const int32_t *)wr;
            int64_t n_sym = 0;
            index_set_diff(a, b, rlen, tmp, &sd, tmp + 2 * rlen, &n_sym);
            /* the window part (widx, the first cols columns of idx) has no tie to explain; the
             * compressed entries (csel, the rest of idx) are what the scores explain */
            int64_t c0 = id == AS_T_IDX ? want->cols : 0;
            bool window_same = id == AS_T_CSEL ||
                               (id == AS_T_IDX && got->cols == want->cols && c0 >= 0 && c0 <= rlen &&
                                memcmp(a, b, (size_t)c0 * sizeof *a) == 0);
            if (window_same) {
                AsSelDiff scratch = {0};
                index_set_diff(a + c0, b + c0, rlen - c0, tmp, &scratch, tmp + 2 * rlen, &n_sym);
                why = explain_compressed(got, want, t, tmp + 2 * rlen, n_sym, near_ulps, &sd.margin);
                if (why == SEL_TIE_ORDER)
                    fit = fit_compressed(got, want, t, a + c0, rlen - c0);
            }
        }
        sd.near_tie = why == SEL_NEAR_TIE;
        sd.tie_order = why == SEL_TIE_ORDER;
        if (why == SEL_NEAR_TIE)
            out->n_near_tie++;
        else if (why == SEL_TIE_ORDER) {
            out->tie_fit = out->n_tie_order ? (AsTieFit)(out->tie_fit & fit) : fit;
            out->n_tie_order++;
        } else
            out->n_real++;
        if (out->n_seldiffs < AS_MAX_SELDIFFS)
            out->seldiff[out->n_seldiffs++] = sd;
    }
    free(tmp);
    out->verdict = !out->n_rows_differ ? AS_V_PASS
                   : out->n_real      ? AS_V_MISMATCH
                   : out->n_tie_order ? AS_V_TIE_ORDER
                                      : AS_V_NEAR_TIE;
    out->cause = !out->n_rows_differ ? AS_CAUSE_NONE
                 : out->n_real      ? AS_CAUSE_REAL
                 : out->n_tie_order ? AS_CAUSE_TIE_ORDER
                                    : AS_CAUSE_NEAR_TIE;
}

/* ---- entry points ---------------------------------------------------------------------- */

void as_compare_tensor(const AsRun *got, const AsRun *want, AsTensorId id, const AsCompareOptions *opt,
                       AsTensorDiff *out)
{
    memset(out, 0, sizeof *out);
    out->worst = -1;
    AsCompareOptions def;
    if (!opt) {
        as_compare_options_default(&def);
        opt = &def;
    }
    out->from = (AsProvenance){-1, -1};
    const AsHostTensor *g = &got->t[id], *w = &want->t[id];
    out->absent_got = !g->data;
    out->absent_want = !w->data;
    bool required = (opt->require >> id) & 1;
    if (!g->data && !w->data) {
        out->verdict = AS_V_ABSENT;
        return;
    }
    if (!g->data || !w->data) {
        /* stored on one side only: in a partial comparison, not judged (unless required) */
        bool partial = !g->data ? opt->got_partial : opt->want_partial;
        out->verdict = partial && !required ? AS_V_ABSENT : AS_V_MISMATCH;
        out->cause = out->verdict == AS_V_MISMATCH ? AS_CAUSE_REAL : AS_CAUSE_NONE;
        return;
    }
    out->numel = as_ht_numel(w);
    if (!same_shape(g, w) || g->ndim < 1 || g->ndim > 3) {
        out->shape_differs = true;
        out->verdict = AS_V_MISMATCH;
        out->cause = AS_CAUSE_REAL;
        return;
    }
    if (as_tensor_desc[id].selection) {
        compare_selection(got, want, id, opt, out);
    } else if (opt->quantised && q_downstream(got, want, id)) {
        AsTolerance tol = opt->tol[id];
        tol.rel += Q_REL;
        compare_values(got, want, id, tol, Q_ULPS, out);
    } else {
        compare_values(got, want, id, opt->tol[id], 1, out);
    }
}

/* Quantised models (SPEC 6, last item): the indexer's tensors exist only to rank positions, and
 * q8_1-rounded projections feeding two fp4 quantisers (queries and keys) move single scores by far
 * more than any bf16-derived bound. They are judged through what they produce: when the layer's
 * selections (csel, idx, cand) are exact or near-ties, an index-path tensor beyond its tolerance is
 * reported (max_abs kept) but explained, not a mismatch (docs/GGUF.md). */
static void judge_index_path_by_selections(AsLayerDiff *out)
{
    static const AsTensorId index_path[] = {AS_T_IK_PRE, AS_T_IK, AS_T_IQ_PRE, AS_T_IQ, AS_T_W, AS_T_KEYS, AS_T_ISCORE,
                                            AS_T_ST_IKCACHE};
    static const AsTensorId selections[] = {AS_T_CSEL, AS_T_IDX, AS_T_CAND};
    for (size_t i = 0; i < sizeof selections / sizeof selections[0]; i++)
        if (out->t[selections[i]].verdict == AS_V_MISMATCH)
            return;
    for (size_t i = 0; i < sizeof index_path / sizeof index_path[0]; i++) {
        AsTensorDiff *d = &out->t[index_path[i]];
        if (d->verdict == AS_V_MISMATCH && !d->shape_differs && !d->absent_got && !d->absent_want) {
            d->verdict = AS_V_PASS;
            d->cause = AS_CAUSE_NONE;
            d->explained = true;
            d->explained_max_abs = d->max_abs;
        }
    }
}

void as_compare_layer(const AsRun *got, const AsRun *want, const AsCompareOptions *opt, AsLayerDiff *out)
{
    out->layer = want->layer;
    out->step = want->step;
    out->verdict = AS_V_NOT_RUN;
    out->worst_tensor = AS_T_COUNT;
    for (int i = 0; i < AS_T_COUNT && !as_ref_cancelled(); i++)
        as_compare_tensor(got, want, (AsTensorId)i, opt, &out->t[i]);
    if (opt && opt->quantised) /* opt NULL: the defaults */
        judge_index_path_by_selections(out);
    double worst_rel = -1;
    for (int i = 0; i < AS_T_COUNT; i++) {
        AsTensorDiff *d = &out->t[i];
        /* verdicts are ordered by severity; the first tensor in forward order at the worst
         * level is where a divergence starts; among passes, the one closest to its limit */
        double rel = d->tol > 0 && !d->explained ? d->max_abs / d->tol : 0;
        if (d->verdict > out->verdict) {
            out->verdict = d->verdict;
            /* an exact pass has no worst tensor */
            out->worst_tensor = d->verdict == AS_V_PASS && rel == 0 ? AS_T_COUNT : (AsTensorId)i;
            worst_rel = rel;
        } else if (d->verdict == AS_V_PASS && out->verdict == AS_V_PASS && rel > worst_rel) {
            out->worst_tensor = (AsTensorId)i;
            worst_rel = rel;
        }
    }
    if (out->verdict <= AS_V_ABSENT)
        out->worst_tensor = AS_T_COUNT;
}

static int fmt_set(char *buf, int n, const int32_t *v, int count)
{
    int used = snprintf(buf, (size_t)n, "{");
    for (int i = 0; i < count && i < 8 && used < n; i++)
        used += snprintf(buf + used, (size_t)(n - used), "%s%d", i ? " " : "", v[i]);
    if (used < n)
        used += snprintf(buf + used, (size_t)(n - used), "%s}", count > 8 ? " ..." : "");
    return used;
}

void as_tensor_diff_line(AsTensorId id, const AsTensorDiff *d, char *buf, int n)
{
    if (n <= 0)
        return;
    const char *name = (unsigned)id < AS_T_COUNT ? as_tensor_desc[id].name : "?";
    const char *v = as_verdict_name(d->verdict);
    if (d->verdict == AS_V_NOT_RUN || d->verdict == AS_V_ABSENT) {
        snprintf(buf, (size_t)n, "%s: %s", name, v);
        return;
    }
    if (d->absent_got || d->absent_want) {
        snprintf(buf, (size_t)n, "%s: %s absent in %s", name, v, d->absent_got ? "got" : "want");
        return;
    }
    if (d->cause == AS_CAUSE_INHERITED && d->from.layer >= 0) {
        char inner[400];
        AsTensorDiff plain = *d;
        plain.cause = AS_CAUSE_NONE;
        as_tensor_diff_line(id, &plain, inner, sizeof inner);
        snprintf(buf, (size_t)n, "%s (inherited from layer %d step %d)", inner, d->from.layer, d->from.step);
        return;
    }
    if (d->shape_differs) {
        snprintf(buf, (size_t)n, "%s: %s shapes differ", name, v);
        return;
    }
    char where[128] = "";
    int ndim = (unsigned)id < AS_T_COUNT ? as_tensor_desc[id].ndim : 3;
    if (d->worst >= 0)
        as_format_coord(id, d->worst_coord, ndim, where, sizeof where);
    if ((unsigned)id < AS_T_COUNT && as_tensor_desc[id].selection) {
        if (!d->n_rows_differ) {
            snprintf(buf, (size_t)n, "%s: %s exact (%lld elements)", name, v, (long long)d->numel);
            return;
        }
        char sg[96] = "", sw[96] = "";
        if (d->n_seldiffs) {
            fmt_set(sg, sizeof sg, d->seldiff[0].only_got, d->seldiff[0].n_only_got);
            fmt_set(sw, sizeof sw, d->seldiff[0].only_want, d->seldiff[0].n_only_want);
        }
        char ties[64] = "", why[96];
        if (d->n_tie_order)
            snprintf(ties, sizeof ties, ", %lld tie-order: %s", (long long)d->n_tie_order, as_tie_fit_what(d->tie_fit));
        if (d->explained) /* the scores did not explain them; the checked side's own inputs do */
            snprintf(why, sizeof why, "each following from its inputs");
        else
            snprintf(why, sizeof why, "%lld near-tie, %lld real%s", (long long)d->n_near_tie, (long long)d->n_real, ties);
        snprintf(buf, (size_t)n,
                 "%s: %s %lld rows differ (%s), first at %s: got %g want %g; "
                 "query %lld only got %s only want %s, margin %g ulp",
                 name, v, (long long)d->n_rows_differ, why, where,
                 d->worst_got, d->worst_want, d->n_seldiffs ? (long long)d->seldiff[0].query : -1LL, sg, sw,
                 d->n_seldiffs ? d->seldiff[0].margin : 0.0);
        return;
    }
    if (d->worst < 0) {
        snprintf(buf, (size_t)n, "%s: %s identical (%lld elements)%s", name, v, (long long)d->numel,
                 d->n_flips ? " apart from quantisation flips" : "");
        if (d->n_flips) {
            size_t used = strlen(buf);
            snprintf(buf + used, (size_t)n - used, " (%lld)", (long long)d->n_flips);
        }
        return;
    }
    char ulp[32];
    if (d->worst_ulp == INT64_MAX)
        snprintf(ulp, sizeof ulp, "NaN");
    else
        snprintf(ulp, sizeof ulp, "%lld ulp", (long long)d->worst_ulp);
    snprintf(buf, (size_t)n, "%s: %s max_abs %.4g %s tol %.4g (rel %.4g) at %s: got %.6g want %.6g (%s); %lld bad, %lld flips",
             name, v, d->max_abs, d->max_abs <= d->tol ? "<=" : ">", d->tol, d->max_rel, where, d->worst_got,
             d->worst_want, ulp, (long long)d->n_bad, (long long)d->n_flips);
}

/* ---- causes ------------------------------------------------------------------------------ */

void as_tensor_cause(const AsLayerDiff *d, AsTensorId id, char *why, int n)
{
    if (n <= 0)
        return;
    const AsTensorDiff *t = &d->t[id];
    switch (t->cause) {
    case AS_CAUSE_TIE_ORDER:
        snprintf(why, (size_t)n, "tie-order (%s)", as_tie_fit_what(t->tie_fit));
        return;
    case AS_CAUSE_INHERITED:
        if (t->from.layer >= 0 && (t->from.layer != d->layer || t->from.step != d->step)) {
            snprintf(why, (size_t)n, "inherited from layer %d step %d", t->from.layer, t->from.step);
            return;
        }
        /* from a difference upstream in the same layer: name the first one */
        for (int i = 0; i < (int)id; i++)
            if (d->t[i].verdict > AS_V_PASS && d->t[i].verdict != AS_V_MISMATCH) {
                snprintf(why, (size_t)n, "inherited from %s (%s) in this layer", as_tensor_desc[i].name,
                         as_verdict_name(d->t[i].verdict));
                return;
            }
        snprintf(why, (size_t)n, "inherited (follows from its inputs in this layer)");
        return;
    case AS_CAUSE_NONE:
        snprintf(why, (size_t)n, "%s", t->verdict == AS_V_MISMATCH ? "real" : as_verdict_name(t->verdict));
        return;
    default:
        snprintf(why, (size_t)n, "%s", as_cause_name(t->cause));
        return;
    }
}

AsTensorId as_layer_cause(const AsLayerDiff *d, char *why, int n)
{
    /* a mismatching layer: its first mismatch (what does not follow from its inputs); else the
     * first tensor out of rule */
    AsVerdict at = d->verdict == AS_V_MISMATCH ? AS_V_MISMATCH : AS_V_FLIPS;
    for (int i = 0; i < AS_T_COUNT; i++)
        if (d->t[i].verdict >= at) {
            if (why)
                as_tensor_cause(d, (AsTensorId)i, why, n);
            return (AsTensorId)i;
        }
    if (why && n > 0)
        why[0] = '\0';
    return AS_T_COUNT;
}
