#include "driver/explain.h"

#include "ref/linear.h"

#include <string.h>

static bool ok(AsVerdict v) { return v != AS_V_MISMATCH; }

/* The worst verdict among the tensors before `id` in forward order. */
static AsVerdict upstream(const AsLayerDiff *d, AsTensorId id)
{
    AsVerdict worst = AS_V_PASS;
    for (int i = 0; i < (int)id; i++) {
        AsVerdict v = d->t[i].verdict;
        if (v == AS_V_MISMATCH)
            return v;
        if (v == AS_V_NEAR_TIE || (v == AS_V_FLIPS && worst != AS_V_NEAR_TIE))
            worst = v;
    }
    return worst;
}

static void rejudge(AsLayerDiff *d)
{
    static const int rank[AS_V_COUNT] = {[AS_V_NOT_RUN] = 0, [AS_V_ABSENT] = 1, [AS_V_PASS] = 2,
                                         [AS_V_FLIPS] = 3,   [AS_V_NEAR_TIE] = 4, [AS_V_MISMATCH] = 5};
    d->verdict = AS_V_ABSENT;
    d->worst_tensor = AS_T_COUNT;
    for (int i = 0; i < AS_T_COUNT; i++)
        if (rank[d->t[i].verdict] > rank[d->verdict]) {
            d->verdict = d->t[i].verdict;
            d->worst_tensor = (AsTensorId)i;
        }
}

/* Compares got's tensor id with the reference's recomputation held in `redo`; marks it explained. */
static bool settle(const AsRun *got, const AsRun *redo, AsTensorId id, const AsCompareOptions *opt, AsLayerDiff *d)
{
    AsTensorDiff again;
    as_compare_tensor(got, redo, id, opt, &again);
    if (!ok(again.verdict))
        return false;
    AsTensorDiff *t = &d->t[id];
    t->explained = true;
    t->explained_max_abs = again.max_abs;
    t->verdict = upstream(d, id) == AS_V_NEAR_TIE ? AS_V_NEAR_TIE : AS_V_FLIPS;
    return true;
}

void as_explain_downstream(const AsRefModel *rm, const AsRun *got, const AsCompareOptions *opt, AsLayerDiff *diff)
{
    static const AsTensorId stages[] = {AS_T_O, AS_T_O_BACK, AS_T_OG, AS_T_OUT};
    int first = -1;
    for (int i = 0; i < 4; i++)
        if (diff->t[stages[i]].verdict == AS_V_MISMATCH) {
            first = i;
            break;
        }
    if (first < 0 || !ok(upstream(diff, stages[first])))
        return;
    int l = got->layer, s = got->s;
    AsRun redo;
    as_run_init(&redo);
    redo.layer = l;
    redo.s = s;
    bool fine = true;
    for (int i = first; i < 4 && fine; i++) {
        AsTensorId id = stages[i];
        const AsHostTensor *g = &got->t[id];
        if (!g->data)
            break;
        if (diff->t[id].verdict != AS_V_MISMATCH)
            continue; /* this stage already passes on its own */
        float *y = as_run_shape(&redo, id, g->ndim, g->shape[0], g->shape[1], g->shape[2]);
        if (!y)
            break;
        if (id == AS_T_O) {
            const AsHostTensor *q = &got->t[AS_T_Q], *ra = &got->t[AS_T_ROWS_A], *rb = &got->t[AS_T_ROWS_B];
            if (!q->data || !ra->data || !got->t[AS_T_IDX].data ||
                as_ref_attend(rm, l, q->data, ra->data, got->rows_a_len, rb->data, rb->data ? got->rows_b_len : 0,
                              got->t[AS_T_IDX].data, got->topk, s, y))
                break;
        } else if (id == AS_T_O_BACK) {
            if (!got->t[AS_T_O].data)
                break;
            as_ref_rotate_back(rm, l, got->t[AS_T_O].data, s, got->start_pos, y);
        } else if (id == AS_T_OG) {
            if (!got->t[AS_T_O_BACK].data || as_ref_project_out(rm, l, got->t[AS_T_O_BACK].data, s, y, NULL))
                break;
        } else {
            const AsHostTensor *og = &got->t[AS_T_OG];
            if (!og->data)
                break;
            /* out = linear(og, wo_b): project_out's second half on the got side's og */
            as_linear(og->data, s, rm->m->layer[l].wo_b, y, true);
        }
        fine = settle(got, &redo, id, opt, diff);
    }
    as_run_free(&redo);
    rejudge(diff);
}
