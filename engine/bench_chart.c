/* Two bar charts in one SVG: per layer, the decode step's device time with its HBM floor drawn over
 * it, and the prefill's device time stacked by stage (projections, sparse attention, index scores,
 * selection, the rest). Scales are linear from 0 with round gridlines, so bars compare by eye. */
#include "engine/bench_chart.h"

#include <math.h>
#include <string.h>

enum { W = 1100, PANEL_H = 300, LEFT = 70, RIGHT = 20, TOP = 40, GAP = 90 };

/* A round step for about 5 gridlines up to max. */
static double grid_step(double max)
{
    if (max <= 0)
        return 1;
    double raw = max / 5, p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void text_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

/* Axes, gridlines and layer labels of one panel; returns the y scale (px per ms). */
static double panel_axes(FILE *f, const AsBenchChart *c, int y0, double max, const char *title)
{
    const double step = grid_step(max);
    const double top = ceil(max / step) * step;
    const double scale = (PANEL_H - 40) / (top > 0 ? top : 1);
    const int base = y0 + PANEL_H - 20;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">", LEFT, y0 + 4);
    text_escaped(f, title);
    fputs("</text>\n", f);
    for (double v = 0; v <= top + step / 2; v += step) {
        const double y = base - v * scale;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, y, W - RIGHT, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n", LEFT - 6, y + 4, v);
    }
    fprintf(f, "<text x=\"14\" y=\"%d\" font-size=\"11\" transform=\"rotate(-90 14 %d)\">ms</text>\n",
            base - (PANEL_H - 40) / 2, base - (PANEL_H - 40) / 2);
    const double bw = (double)(W - LEFT - RIGHT) / c->n_layers;
    for (int l = 0; l < c->n_layers; l++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\">%d</text>\n",
                LEFT + (l + 0.5) * bw, base + 12, l);
    return scale;
}

static const char *kind_colour(const char *kind)
{
    if (!strncmp(kind, "r0", 2))
        return "#7f7f7f";
    if (strstr(kind, "reuse"))
        return strncmp(kind, "r2", 2) ? "#9ecae1" : "#a1d99b";
    return strncmp(kind, "r2", 2) ? "#3182bd" : "#31a354";
}

int as_bench_chart_svg(const AsBenchChart *c, FILE *f)
{
    if (c->n_layers <= 0)
        return -1;
    const int panels = c->have_prefill ? 2 : 1;
    const int H = TOP + panels * (PANEL_H + GAP);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H, W, H);
    fputs("<text x=\"10\" y=\"20\" font-size=\"13\">", f);
    text_escaped(f, c->title);
    fputs("</text>\n", f);
    const double bw = (double)(W - LEFT - RIGHT) / c->n_layers;

    /* decode: bar = device time, coloured by layer kind; black tick = the layer's HBM floor */
    double max = 0;
    for (int l = 0; l < c->n_layers; l++)
        max = fmax(max, fmax(c->decode_ms[l], c->decode_floor_ms[l]));
    int y0 = TOP + 20;
    double sc = panel_axes(f, c, y0, max,
                           "Decode, one token: device time per layer (bar, by kind) and its HBM floor (black tick)");
    int base = y0 + PANEL_H - 20;
    for (int l = 0; l < c->n_layers; l++) {
        const double x = LEFT + l * bw + 1, h = c->decode_ms[l] * sc, hf = c->decode_floor_ms[l] * sc;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>layer %d (%s): "
                   "%.3f ms, floor %.3f ms</title></rect>\n",
                x, base - h, bw - 2, h, kind_colour(c->kind[l]), l, c->kind[l], c->decode_ms[l], c->decode_floor_ms[l]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-width=\"2\"/>\n", x,
                base - hf, x + bw - 2, base - hf);
    }
    /* legend of the kinds */
    const char *seen[AS_MAX_LAYERS];
    int ns = 0;
    for (int l = 0; l < c->n_layers; l++) {
        int j = 0;
        while (j < ns && strcmp(seen[j], c->kind[l]))
            j++;
        if (j == ns)
            seen[ns++] = c->kind[l];
    }
    for (int j = 0; j < ns; j++) {
        const int lx = LEFT + j * 150, ly = base + 30;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" "
                   "font-size=\"11\">",
                lx, ly, kind_colour(seen[j]), lx + 16, ly + 10);
        text_escaped(f, seen[j]);
        fputs("</text>\n", f);
    }

    if (c->have_prefill) {
        static const struct {
            AsOp op;
            const char *name, *colour;
        } st[] = {{AS_OP_PROJ, "projections", "#6baed6"},
                  {AS_OP_ATTN, "sparse attention", "#fd8d3c"},
                  {AS_OP_ISCORE, "index scores", "#74c476"},
                  {AS_OP_SELECT, "selection", "#9e9ac8"}};
        max = 0;
        for (int l = 0; l < c->n_layers; l++)
            max = fmax(max, c->prefill_ms[l][AS_OP_LAYER]);
        y0 = TOP + 20 + PANEL_H + GAP;
        char title[160];
        snprintf(title, sizeof title, "Prefill, %d tokens: device time per layer by stage", c->prefill_tokens);
        sc = panel_axes(f, c, y0, max, title);
        base = y0 + PANEL_H - 20;
        for (int l = 0; l < c->n_layers; l++) {
            const double x = LEFT + l * bw + 1;
            double acc = 0;
            for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
                const double v = c->prefill_ms[l][st[i].op], h = v * sc;
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>layer %d %s: "
                           "%.3f ms</title></rect>\n",
                        x, base - (acc + v) * sc, bw - 2, h, st[i].colour, l, st[i].name, v);
                acc += v;
            }
            const double rest = c->prefill_ms[l][AS_OP_LAYER] - acc;
            if (rest > 0)
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#bdbdbd\"><title>layer %d "
                           "rest (norms, RoPE, quantisers, compressor): %.3f ms</title></rect>\n",
                        x, base - (acc + rest) * sc, bw - 2, rest * sc, l, rest);
        }
        for (size_t i = 0; i <= sizeof st / sizeof st[0]; i++) {
            const int lx = LEFT + (int)i * 150, ly = base + 30;
            const bool last = i == sizeof st / sizeof st[0];
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" "
                       "font-size=\"11\">%s</text>\n",
                    lx, ly, last ? "#bdbdbd" : st[i].colour, lx + 16, ly + 10, last ? "the rest" : st[i].name);
        }
    }
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
