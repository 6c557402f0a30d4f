/* The exit-code table: README.md, docs/BATCH.md and docs/SECURITY.md each hold it (the table
 * whose header is "| exit | meaning |"); the three are the same, and their codes are the exit
 * statuses model/errors.h's AS_OK .. AS_ECANCELLED map to (the enum value, or the "exit N" its
 * comment names), plus the signal row. Each code's row names what errors.h says it is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/errors.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

#define MAX_ROWS 16

typedef struct {
    int n;
    char code[MAX_ROWS][32], meaning[MAX_ROWS][1024];
} Table;

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        s[--n] = '\0';
    size_t k = strspn(s, " ");
    memmove(s, s + k, n - k + 1);
}

/* The rows of the table under "| exit | meaning |" in path; false when it has none. */
static bool read_table(const char *path, Table *t)
{
    memset(t, 0, sizeof *t);
    char *text = as_slurp(path, NULL);
    REQUIRE(text, "%s not found (run the tests from the repository root)", path);
    const char *p = strstr(text, "| exit | meaning |");
    if (!p) {
        free(text);
        return false;
    }
    p = strchr(p, '\n');
    p = p ? strchr(p + 1, '\n') : NULL; /* past "| --- | --- |" */
    while (p && p[1] == '|' && t->n < MAX_ROWS) {
        const char *line = p + 1, *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char row[1100];
        snprintf(row, sizeof row, "%.*s", (int)len, line);
        char *a = strchr(row + 1, '|');
        if (!a)
            break;
        *a = '\0';
        char *b = strrchr(a + 1, '|');
        if (b)
            *b = '\0';
        snprintf(t->code[t->n], sizeof t->code[0], "%.31s", row + 1);
        snprintf(t->meaning[t->n], sizeof t->meaning[0], "%.1000s", a + 1);
        trim(t->code[t->n]);
        trim(t->meaning[t->n]);
        t->n++;
        p = end;
    }
    free(text);
    return true;
}

typedef struct {
    char name[32];
    int value, exit;
} Code;

/* AS_* = N entries of errors.h's enum, with "exit N" from the comment when it names one. */
static int read_codes(Code *c, int max)
{
    char *text = as_slurp("model/errors.h", NULL);
    REQUIRE(text, "model/errors.h not found");
    int n = 0;
    const char *p = strstr(text, "enum {");
    REQUIRE(p, "errors.h: no enum");
    const char *end = strstr(p, "};");
    for (const char *q = p; (q = strstr(q, "AS_")) && q < end && n < max; q++) {
        int len = 0, v;
        if (sscanf(q, "%31[A-Z_] = %d,%n", c[n].name, &v, &len) != 2 || !len)
            continue;
        c[n].value = c[n].exit = v;
        const char *eol = strchr(q, '\n');
        const char *ex = strstr(q, "exit ");
        if (ex && ex < eol)
            c[n].exit = atoi(ex + 5);
        n++;
        q = eol ? eol : q;
    }
    free(text);
    return n;
}

/* What each code's row must say (the words errors.h's comment uses for it). */
static const struct {
    const char *name, *says;
} words[] = {
    {"AS_OK", "ok"},          {"AS_EMISMATCH", "mismatch"}, {"AS_EBADINPUT", "bad input"},
    {"AS_ERUNTIME", "runtime"}, {"AS_EREFUSED", "refuses"},  {"AS_ECANCELLED", "cancel"},
};

TEST(exit_codes_docs_agree_with_errors_h)
{
    Code c[16];
    const int n = read_codes(c, 16);
    CHECK(n == 6 && !strcmp(c[0].name, "AS_OK") && !strcmp(c[n - 1].name, "AS_ECANCELLED"),
          "errors.h: %d codes, AS_OK .. AS_ECANCELLED expected", n);
    CHECK(AS_OK == 0 && AS_EMISMATCH == 1 && AS_EBADINPUT == 2 && AS_ERUNTIME == 3 && AS_EREFUSED == 4 &&
              AS_ECANCELLED == 5,
          "the parsed enum is the compiled one");
    static const int compiled[] = {AS_OK, AS_EMISMATCH, AS_EBADINPUT, AS_ERUNTIME, AS_EREFUSED, AS_ECANCELLED};
    for (int i = 0; i < n && i < 6; i++)
        CHECK(c[i].value == compiled[i], "%s = %d", c[i].name, c[i].value);
    const char *docs[] = {"README.md", "docs/BATCH.md", "docs/SECURITY.md"};
    Table t[3];
    for (int d = 0; d < 3; d++)
        REQUIRE(read_table(docs[d], &t[d]), "%s: no \"| exit | meaning |\" table", docs[d]);
    for (int d = 1; d < 3; d++) {
        CHECK(t[d].n == t[0].n, "%s has %d rows, README.md %d", docs[d], t[d].n, t[0].n);
        for (int i = 0; i < t[0].n && i < t[d].n; i++)
            CHECK(!strcmp(t[d].code[i], t[0].code[i]) && !strcmp(t[d].meaning[i], t[0].meaning[i]),
                  "%s row %d differs from README.md's:\n  %s | %s\n  %s | %s", docs[d], i, t[d].code[i],
                  t[d].meaning[i], t[0].code[i], t[0].meaning[i]);
    }
    /* every exit status errors.h gives has a row naming it; every numeric row is one of them */
    for (int i = 0; i < n; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d", c[i].exit);
        int row = -1;
        for (int k = 0; k < t[0].n; k++)
            if (!strcmp(t[0].code[k], want))
                row = k;
        CHECK(row >= 0, "%s exits %d: no row for it", c[i].name, c[i].exit);
        const char *says = NULL;
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
            if (!strcmp(words[w].name, c[i].name))
                says = words[w].says;
        CHECK(says, "%s: no words for it in this test (a new code: add it here and to the tables)", c[i].name);
        if (row >= 0 && says)
            CHECK(strstr(t[0].meaning[row], says), "%s (exit %d): its row does not say \"%s\": %s", c[i].name,
                  c[i].exit, says, t[0].meaning[row]);
    }
    for (int k = 0; k < t[0].n; k++) {
        char *e;
        long v = strtol(t[0].code[k], &e, 10);
        if (*e) /* the signal row */
            continue;
        bool known = false;
        for (int i = 0; i < n; i++)
            known |= c[i].exit == v;
        CHECK(known, "row %s: no code in errors.h exits with it", t[0].code[k]);
    }
    /* the interrupt: the process ends with the signal, as the signal row says */
    bool sig = false;
    for (int k = 0; k < t[0].n; k++)
        sig |= !strcmp(t[0].code[k], "130, 143") && strstr(t[0].meaning[k], "ends with the signal");
    CHECK(sig, "no \"130, 143\" row saying the process ends with the signal");
}
