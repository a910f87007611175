/*
 * The tuning file fold_tune writes (format: select.h): a header comment saying where
 * it comes from and how to use it, the cost-model parameters, the rules and the serve
 * lines, each with a comment saying what it rests on.
 */
#include "tune.h"

#include <fold/fold_status.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *note_of(const tune_param_note_t *notes, size_t nnotes, const char *name)
{
    for (size_t i = 0; i < nnotes; i++) {
        if (strcmp(notes[i].name, name) == 0) {
            return notes[i].note;
        }
    }
    return NULL;
}

/* fold_model_print's lines ("param name value"), each with its note. */
static int write_params(FILE *out, const fold_model_params_t *p, const tune_param_note_t *notes,
                        size_t nnotes)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL) {
        return -1;
    }
    fold_model_print(p, "param ", mem);
    if (fclose(mem) != 0 || text == NULL) {
        free(text);
        return -1;
    }
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char name[64] = "";
        sscanf(line, "param %63s", name);
        const char *note = note_of(notes, nnotes, name);
        fprintf(out, "%-40s # %s\n", line,
                note != NULL ? note : "as fold_init set it (its calibration, else the default)");
    }
    free(text);
    return 0;
}

int tune_write_file(FILE *out, const tune_header_t *h, const fold_model_params_t *p,
                    const tune_param_note_t *notes, size_t nnotes,
                    const tune_range_t *rules, size_t nrules,
                    const tune_range_t *serve, size_t nserve)
{
    const fold_shape_t *s = &h->shape;
    int with_mpi = h->mpi_library != NULL && h->mpi_library[0] != '\0';
    fprintf(out,
            "# fold tuning file, written by fold_tune (fold %s) on %s\n"
            "# host %s; shape: %d rank%s on %d node%s, %d-%d rank%s per node\n"
            "# MPI library: %s\n"
            "# sweep: %s\n"
            "#\n"
            "# Use it with\n"
            "#     export FOLD_TUNE_FILE=/path/to/this/file\n"
            "# or install it as <prefix>/etc/fold/tune, which fold reads by default\n"
            "# (FOLD_TUNE_FILE=auto). fold_info -m shows the parameters in effect,\n"
            "# fold_info -S NODESxPPN what selection then picks on any shape.\n"
            "#\n"
            "# param: the cost model (runtime/coll/model.h), calibrated on this machine; it\n"
            "#        picks algorithms and leaders on every shape the rules do not cover.\n"
            "# rule:  the fastest algorithm measured per size range, on this shape only\n"
            "#        (n<nodes>-<nodes>:ppn<ranks>-<ranks>); tried after FOLD_TUNE and\n"
            "#        before the built-in rules. The comment gives the sizes it rests on and\n"
            "#        the leaders that measured fastest (the model picks them at run time).\n"
            "# serve: where fold (the rule's algorithm) measured at most the MPI library's\n"
            "#        median, for the MPI shim; elsewhere it hands the call to MPI.\n",
            h->fold_version, h->date, h->host, s->size, s->size == 1 ? "" : "s", s->nnodes,
            s->nnodes == 1 ? "" : "s", s->min_ppn, s->max_ppn, s->max_ppn == 1 ? "" : "s",
            with_mpi ? h->mpi_library : "not timed (--no-mpi, or built without MPI)",
            h->sweep);
    fprintf(out, "\n");
    if (write_params(out, p, notes, nnotes) != 0) {
        return -1;
    }
    fprintf(out, "\n");
    for (size_t i = 0; i < nrules; i++) {
        char where[256], line[400];
        tune_range_where(&rules[i], s, where, sizeof(where));
        snprintf(line, sizeof(line), "rule %s:%s", where, rules[i].what);
        fprintf(out, "%-56s # %s\n", line, rules[i].note);
    }
    fprintf(out, "\n");
    if (nserve == 0) {
        fprintf(out, "# no serve lines: the MPI library was not timed\n");
    }
    for (size_t i = 0; i < nserve; i++) {
        char where[256], line[400];
        tune_range_where(&serve[i], s, where, sizeof(where));
        snprintf(line, sizeof(line), "serve %s:%s", where, serve[i].what);
        fprintf(out, "%-56s # %s\n", line, serve[i].note);
    }
    return ferror(out) ? -1 : 0;
}

int tune_write_path(const char *path, const tune_header_t *h, const fold_model_params_t *p,
                    const tune_param_note_t *notes, size_t nnotes,
                    const tune_range_t *rules, size_t nrules,
                    const tune_range_t *serve, size_t nserve)
{
    size_t len = strlen(path) + 8;
    char *tmp = malloc(len);
    if (tmp == NULL) {
        fprintf(stderr, "fold_tune: no memory to write '%s'\n", path);
        return -1;
    }
    snprintf(tmp, len, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (out == NULL) {
        fprintf(stderr, "fold_tune: cannot write '%s': %s\n", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int status = tune_write_file(out, h, p, notes, nnotes, rules, nrules, serve, nserve);
    int saved = errno;
    if (fclose(out) != 0 && status == 0) {
        saved  = errno;
        status = -1;
    }
    if (status == 0 && rename(tmp, path) != 0) {
        saved  = errno;
        status = -1;
    }
    if (status != 0) {
        fprintf(stderr, "fold_tune: writing '%s' failed: %s\n", path, strerror(saved));
        remove(tmp);
    }
    free(tmp);
    return status;
}

/* Every parameter as fold_model_print writes it: equal text, equal parameters. */
static char *params_text(const fold_model_params_t *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL) {
        return NULL;
    }
    fold_model_print(p, "", mem);
    if (fclose(mem) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int check_params(const fold_tune_file_t *f, const fold_model_params_t *p, char *why,
                        size_t whylen)
{
    fold_model_params_t q;
    if (fold_model_configure(NULL, f->params, NULL, &q) != FOLD_OK) {
        snprintf(why, whylen, "its parameters do not configure the model");
        return -1;
    }
    char *want = params_text(p), *got = params_text(&q);
    int same = want != NULL && got != NULL && strcmp(want, got) == 0;
    if (!same) {
        snprintf(why, whylen, "its parameters read back differently");
    }
    free(want);
    free(got);
    return same ? 0 : -1;
}

int tune_verify_file(const char *path, const fold_shape_t *shape, const fold_model_params_t *p,
                     const tune_point_t *pts, const tune_size_t *sizes, size_t nsizes,
                     size_t nrules, size_t nserve, char *why, size_t whylen)
{
    fold_tune_file_t f;
    int status = fold_tune_file_load(path, &f);
    if (status != FOLD_OK) {
        snprintf(why, whylen, "fold_tune_file_load failed: %s", fold_status_string(status));
        return -1;
    }
    int bad = 0;
    if ((size_t)f.rules.nrules != nrules || (size_t)f.nserve != nserve) {
        snprintf(why, whylen, "%d rules and %d serve lines read back, %zu and %zu written",
                 f.rules.nrules, f.nserve, nrules, nserve);
        bad = 1;
    }
    if (!bad) {
        bad = check_params(&f, p, why, whylen) != 0;
    }
    fold_shape_t other = *shape;
    other.nnodes++;
    for (size_t i = 0; i < nsizes && !bad; i++) {
        const tune_size_t *v = &sizes[i];
        const char *want = pts[v->chosen].alg;
        const fold_tune_rule_t *r = fold_tune_match(&f.rules, v->coll, v->bytes, shape, 0);
        char got[96] = "nothing";
        if (r != NULL && r->nalgs == 1) {
            fold_select_format_alg(r->algs[0], r->segs[0], got, sizeof(got));
        }
        if (r == NULL || r->nalgs != 1 || strcmp(got, want) != 0) {
            snprintf(why, whylen, "%s at %zu bytes: the rules give %s, not %s",
                     fold_coll_name(v->coll), v->bytes, got, want);
            bad = 1;
        } else if (fold_tune_match(&f.rules, v->coll, v->bytes, &other, 0) != NULL) {
            snprintf(why, whylen, "%s at %zu bytes: a rule matches another shape too",
                     fold_coll_name(v->coll), v->bytes);
            bad = 1;
        }
        if (!bad && v->fold_serves >= 0) {
            const fold_serve_rule_t *s = fold_tune_file_serve(&f, v->coll, v->bytes, shape);
            if (s == NULL || s->fold != v->fold_serves) {
                snprintf(why, whylen, "%s at %zu bytes: the serve lines give %s, not %s",
                         fold_coll_name(v->coll), v->bytes,
                         s == NULL ? "nothing" : s->fold ? "fold" : "mpi",
                         v->fold_serves ? "fold" : "mpi");
                bad = 1;
            }
        }
    }
    fold_tune_file_release(&f);
    return bad ? -1 : 0;
}
