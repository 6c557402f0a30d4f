/* The candidates view: the block grid of the candidate mask for a chosen query (SPEC 3, "Select
 * candidate blocks"): blocks kept, dropped, the pinned newest block, blocks not visible yet;
 * and the blocks with their maximum score. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/model.h"

static const float *score_row(const AsRun *r, int t, int width)
{
    const AsHostTensor *s = &r->t[AS_T_ISCORE];
    if (!s->data || s->ndim != 2 || s->shape[1] != width || t >= s->shape[0])
        return NULL;
    return (const float *)s->data + (size_t)t * (size_t)width;
}

int tui_cand_blocks(const AsRun *r, const AsRun *scores_run, const AsRun *got, int t, int bs, TuiBlock *out, int max)
{
    const AsHostTensor *m = &r->t[AS_T_CAND];
    if (!m->data || m->ndim != 2 || bs <= 0 || t < 0 || t >= m->shape[0] || r->ratio <= 0)
        return -1;
    int width = (int)m->shape[1];
    int nb = (width + bs - 1) / bs;
    const uint8_t *mask = (const uint8_t *)m->data + (size_t)t * (size_t)width;
    int cl = r->start_pos == 0 ? (t + 1) / r->ratio : width;
    int pinned = cl >= 1 ? (cl - 1) / bs : -1;
    const float *sc = scores_run ? score_row(scores_run, t, width) : NULL;
    if (!sc)
        sc = score_row(r, t, width);
    const uint8_t *gm = NULL;
    if (got) {
        const AsHostTensor *g = &got->t[AS_T_CAND];
        if (g->data && g->ndim == 2 && g->shape[0] == m->shape[0] && g->shape[1] == width)
            gm = (const uint8_t *)g->data + (size_t)t * (size_t)width;
    }
    for (int b = 0; b < nb && b < max; b++) {
        int lo = b * bs, hi = lo + bs < width ? lo + bs : width;
        TuiBlock *k = &out[b];
        k->score = -INFINITY;
        if (sc)
            for (int p = lo; p < hi; p++)
                k->score = fmaxf(k->score, sc[p]);
        if (lo >= cl)
            k->st = TUI_BLK_HIDDEN;
        else if (b == pinned)
            k->st = TUI_BLK_PINNED;
        else
            k->st = mask[lo] ? TUI_BLK_KEPT : TUI_BLK_DROPPED;
        k->got_differs = 0;
        if (gm && (gm[lo] != 0) != (mask[lo] != 0))
            k->got_differs = gm[lo] ? 1 : -1;
    }
    return nb < max ? nb : max;
}

static const char *block_glyph(const TuiGlyphs *g, TuiBlockState s)
{
    switch (s) {
    case TUI_BLK_KEPT: return g->block_kept;
    case TUI_BLK_DROPPED: return g->block_dropped;
    case TUI_BLK_PINNED: return g->block_pinned;
    default: return g->block_hidden;
    }
}

static TuiColor block_color(const TuiBlock *b)
{
    if (b->got_differs > 0)
        return TC_ONLY_GOT;
    if (b->got_differs < 0)
        return TC_ONLY_WANT;
    switch (b->st) {
    case TUI_BLK_KEPT: return TC_GOOD;
    case TUI_BLK_DROPPED: return TC_BAD;
    case TUI_BLK_PINNED: return TC_ACCENT;
    default: return TC_DIM;
    }
}

static const char *block_name(TuiBlockState s)
{
    switch (s) {
    case TUI_BLK_KEPT: return "kept";
    case TUI_BLK_DROPPED: return "dropped";
    case TUI_BLK_PINNED: return "pinned (newest visible, kept)";
    default: return "not visible yet";
    }
}

void tui_model_cand(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *grid, TuiPanel *blocks)
{
    const AsConfig *cfg = d->cfg;
    int l = st->layer, src = cfg->candidate_source, bs = cfg->candidate_block_size;
    snprintf(blocks->title, sizeof blocks->title, "blocks");
    if (src < 0) {
        snprintf(grid->title, sizeof grid->title, "candidate blocks");
        tls_add(&grid->lines, TC_DIM, " this model has no candidate selection (candidate_source_layer -1)");
        return;
    }
    const AsRun *r = &d->ref[l];
    char whose[96];
    bool own = r->t[AS_T_CAND].data != NULL;
    if (!own) {
        l = src;
        r = &d->ref[src];
        snprintf(whose, sizeof whose, "; layer %d has none", st->layer);
    } else {
        whose[0] = '\0';
    }
    const char *kind = l == src ? "source" : "applied";
    snprintf(grid->title, sizeof grid->title, "candidate blocks: layer %d (%s%s)", l, kind, whose);
    const AsHostTensor *m = &r->t[AS_T_CAND];
    if (!m->data || m->shape[0] <= 0) {
        tls_add(&grid->lines, TC_DIM, " layer %d has no candidate mask yet (it publishes one once its indexer runs)", l);
        tp_follow(grid, &st->top[TV_CAND][0]);
        return;
    }
    int t = st->query < m->shape[0] ? st->query : (int)m->shape[0] - 1;
    int width = (int)m->shape[1], nb = (width + bs - 1) / bs;
    const AsRun *scores_run = &d->ref[src];
    if (scores_run->step != r->step)
        scores_run = r;
    const AsRun *got = d->got && d->done[l] ? &d->got[l] : NULL;
    TuiBlock *bl = calloc((size_t)(nb > 0 ? nb : 1), sizeof *bl);
    if (!bl) {
        tls_add(&grid->lines, TC_BAD, " out of memory");
        return;
    }
    nb = tui_cand_blocks(r, scores_run, got, t, bs, bl, nb);
    int cl = r->start_pos == 0 ? (t + 1) / r->ratio : width;
    char age[96];
    tui_run_age(d, l, age, sizeof age);
    snprintf(grid->title, sizeof grid->title, "candidate blocks: layer %d (%s%s), query %d (position %d)%s", l, kind,
             whose, t, r->start_pos + t, age);
    int n[4] = {0};
    for (int b = 0; b < nb; b++)
        n[bl[b].st]++;
    tls_add(&grid->lines, TC_NORMAL, " %d compressed positions in blocks of %d: %d blocks, top %d kept", width, bs, nb,
            cfg->candidate_topk_blocks);
    TuiLine *line = tls_new(&grid->lines);
    if (line) {
        tl_add(line, TC_NORMAL, " %d visible to this query", cl);
        if (cl >= 1)
            tl_add(line, TC_ACCENT, "; newest visible position %d is in block %d (pinned)", cl - 1, (cl - 1) / bs);
        else
            tl_put(line, TC_DIM, "; nothing visible: nothing pinned");
    }
    line = tls_new(&grid->lines);
    if (line) {
        tl_add(line, TC_GOOD, " %s kept %d", g->block_kept, n[TUI_BLK_KEPT]);
        tl_add(line, TC_BAD, "  %s dropped %d", g->block_dropped, n[TUI_BLK_DROPPED]);
        tl_add(line, TC_ACCENT, "  %s pinned %d", g->block_pinned, n[TUI_BLK_PINNED]);
        tl_add(line, TC_DIM, "  (blank) not visible %d", n[TUI_BLK_HIDDEN]);
    }
    if (got) {
        int dg = 0, dw = 0;
        for (int b = 0; b < nb; b++)
            dg += bl[b].got_differs > 0, dw += bl[b].got_differs < 0;
        line = tls_new(&grid->lines);
        if (line) {
            tl_add(line, dg || dw ? TC_NORMAL : TC_PASS, " engine: %s", dg || dw ? "" : "the same blocks");
            if (dg || dw) {
                tl_add(line, TC_ONLY_GOT, "keeps %d the reference drops", dg);
                tl_put(line, TC_NORMAL, ", ");
                tl_add(line, TC_ONLY_WANT, "drops %d it keeps", dw);
            }
        }
    }
    tls_add(&grid->lines, TC_NORMAL, " ");
    int per = (tp_inner_w(grid) - 9) / 2;
    if (per > 64)
        per = 64;
    if (per < 1)
        per = 1;
    for (int b0 = 0; b0 < nb; b0 += per) {
        TuiLine *gl = tls_new(&grid->lines);
        if (!gl)
            break;
        tl_add(gl, TC_DIM, " b%-5d  ", b0);
        for (int b = b0; b < nb && b < b0 + per; b++) {
            tl_put(gl, block_color(&bl[b]), block_glyph(g, bl[b].st));
            tl_put(gl, TC_NORMAL, " ");
        }
    }
    tp_follow(grid, &st->top[TV_CAND][0]);

    snprintf(blocks->title, sizeof blocks->title, "blocks of query %d: maximum index score (from layer %d)", t,
             scores_run == r ? l : src);
    tl_put(&blocks->header, TC_HEADER, " block  positions      max score  state");
    for (int b = 0; b < nb; b++) {
        TuiLine *bl_line = tls_new(&blocks->lines);
        if (!bl_line)
            break;
        int lo = b * bs, hi = (lo + bs < width ? lo + bs : width) - 1;
        char sc[32];
        if (isinf(bl[b].score) && bl[b].score < 0)
            snprintf(sc, sizeof sc, "%s", g->minus_inf);
        else
            snprintf(sc, sizeof sc, "%.5g", bl[b].score);
        tl_add(bl_line, TC_NORMAL, " %5d  %4d..%-6d %10s  ", b, lo, hi, sc);
        tl_put(bl_line, block_color(&bl[b]), block_name(bl[b].st));
        if (bl[b].got_differs)
            tl_put(bl_line, block_color(&bl[b]), bl[b].got_differs > 0 ? "; the engine keeps it" : "; the engine drops it");
    }
    free(bl);
    tp_follow(blocks, &st->top[TV_CAND][1]);
}
