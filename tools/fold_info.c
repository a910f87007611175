/*
 * fold_info: what this fold build has — version, transports, configuration
 * variables with defaults and descriptions, algorithms with one-line descriptions,
 * and the default selection rules. Like ucx_info / ucc_info.
 */
#include "core.h"

#include <getopt.h>
#include <rdma/fabric.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_version(void)
{
    printf("# fold version %s\n", fold_version_string());
}

/* One line per provider name: its endpoint types, and whether it offers what the
 * ofi transport asks for (reliable datagrams with tagged messages and RMA). */
static void print_ofi_providers(void)
{
    struct fi_info *all = NULL;
    int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, NULL,
                         &all);
    uint32_t version = fi_version();

    printf("#\n# libfabric %u.%u providers (FOLD_OFI_PROVIDER selects one for ofi; 'usable' =\n"
           "# reliable datagrams with tagged messages and RMA, which ofi needs)\n#\n",
           FI_MAJOR(version), FI_MINOR(version));
    if (ret != 0) {
        printf("#   none found: %s\n", fi_strerror(-ret));
        return;
    }
    for (struct fi_info *i = all; i != NULL; i = i->next) {
        const char *name = i->fabric_attr->prov_name;
        int seen = 0;
        for (struct fi_info *j = all; j != i && !seen; j = j->next) {
            seen = strcmp(j->fabric_attr->prov_name, name) == 0;
        }
        if (seen) {
            continue;
        }
        int msg = 0, rdm = 0, dgram = 0, usable = 0;
        for (struct fi_info *j = i; j != NULL; j = j->next) {
            if (strcmp(j->fabric_attr->prov_name, name) != 0) {
                continue;
            }
            msg   |= j->ep_attr->type == FI_EP_MSG;
            dgram |= j->ep_attr->type == FI_EP_DGRAM;
            rdm   |= j->ep_attr->type == FI_EP_RDM;
            usable |= j->ep_attr->type == FI_EP_RDM &&
                      (j->caps & (FI_TAGGED | FI_RMA)) == (FI_TAGGED | FI_RMA);
        }
        char types[32];
        snprintf(types, sizeof(types), "%s%s%s", rdm ? "rdm " : "", msg ? "msg " : "",
                 dgram ? "dgram " : "");
        size_t types_len = strlen(types);
        if (types_len > 0) {
            types[types_len - 1] = '\0';   /* the last type's trailing space */
        }
        if (usable) {
            printf("#   %-16s %-16s usable\n", name, types);
        } else {
            printf("#   %-16s %s\n", name, types);
        }
    }
    fi_freeinfo(all);
}

static void print_transports(void)
{
    printf("#\n# Transports\n#\n");
    for (int i = 0; fold_tl_all[i] != NULL; i++) {
        printf("#   %-10s %s\n", fold_tl_all[i]->name, fold_tl_all[i]->description);
    }
    print_ofi_providers();
}

static void print_config(void)
{
    printf("#\n# Configuration (environment variables; current value if set)\n#\n");
    for (int i = 0; i < FOLD_CFG_COUNT; i++) {
        const fold_config_var_t *v = &fold_config_vars[i];
        char env[64];
        snprintf(env, sizeof(env), "FOLD_%s", v->name);
        const char *set = getenv(env);
        printf("# %s\n", v->description);
        printf("%s=%s%s%s\n#\n", env, set ? set : v->default_value, set ? "  # default: " : "",
               set ? v->default_value : "");
    }
}

static void print_algorithms(void)
{
    printf("#\n# Algorithms (FOLD_ALLREDUCE_ALG, FOLD_REDUCE_ALG, FOLD_TUNE)\n#\n");
    printf("#   %-20s %-18s %-8s %s\n", "name", "collectives", "ordered", "description");
    for (int i = 0; fold_alg_all[i] != NULL; i++) {
        const fold_alg_t *a = fold_alg_all[i];
        char colls[32] = "";
        if (a->allreduce) {
            strcat(colls, "allreduce");
        }
        if (a->reduce) {
            strcat(colls, a->allreduce ? ",reduce" : "reduce");
        }
        printf("#   %-20s %-18s %-8s %s\n", a->name, colls,
               (a->flags & FOLD_ALG_ORDERED) ? "yes" : "no", a->description);
    }
    printf("#\n# 'ordered' algorithms keep the rank order, so they serve non-commutative ops;\n"
           "# for those ops the others give way to recursive_doubling / binomial.\n");
}

static void print_selection(void)
{
    printf("#\n# Default selection (first matching rule wins; FOLD_TUNE rules come first)\n#\n");
    char *copy = strdup(fold_default_tune);
    for (char *save = NULL, *r = strtok_r(copy, "#", &save); r != NULL;
         r = strtok_r(NULL, "#", &save)) {
        printf("#   %s\n", r);
    }
    free(copy);
}

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Usage: %s [options]\n"
            "Prints what this fold build provides. Without options, prints everything.\n"
            "  -v   version\n"
            "  -t   transports, and the libfabric providers found\n"
            "  -c   configuration variables, defaults and descriptions\n"
            "  -a   algorithms and the default selection rules\n"
            "  -h   this help\n",
            prog);
}

int main(int argc, char **argv)
{
    int want_version = 0, want_tl = 0, want_cfg = 0, want_alg = 0, opt;
    while ((opt = getopt(argc, argv, "vtcah")) != -1) {
        switch (opt) {
        case 'v': want_version = 1; break;
        case 't': want_tl = 1; break;
        case 'c': want_cfg = 1; break;
        case 'a': want_alg = 1; break;
        case 'h': usage(stdout, argv[0]); return 0;
        default: usage(stderr, argv[0]); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
        usage(stderr, argv[0]);
        return 2;
    }
    int all = !(want_version || want_tl || want_cfg || want_alg);
    if (all || want_version) {
        print_version();
    }
    if (all || want_tl) {
        print_transports();
    }
    if (all || want_cfg) {
        print_config();
    }
    if (all || want_alg) {
        print_algorithms();
        print_selection();
    }
    return 0;
}
