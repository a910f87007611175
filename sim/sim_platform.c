/* fold_sim's built-in platform (sim_platform.h). */
#include "sim_platform.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sim_platform_write(FILE *out, const fold_model_params_t *p, int nnodes, int cores)
{
    const double inter = p->inter_gbs * 1e9 * p->nics;
    const double intra = (p->intra_gbs < p->shm_gbs ? p->intra_gbs : p->shm_gbs) * 1e9;
    fprintf(out,
            "<?xml version='1.0'?>\n"
            "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
            "<platform version=\"4.1\">\n"
            "  <!-- fold_sim's built-in cluster, from the cost model's parameters: %d nodes\n"
            "       of %d cores; inter_gbs %.6g x %d links, inter_lat_us %.6g; intra_gbs\n"
            "       %.6g, shm_gbs %.6g, intra_lat_us %.6g -->\n"
            "  <cluster id=\"fold\" prefix=\"node-\" radical=\"0-%d\" suffix=\"\"\n"
            "           speed=\"1Gf\" core=\"%d\"\n"
            "           bw=\"%.17gBps\" lat=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\"\n"
            "           loopback_bw=\"%.17gBps\" loopback_lat=\"%.17gs\"/>\n"
            "</platform>\n",
            nnodes, cores, p->inter_gbs, p->nics, p->inter_lat_us, p->intra_gbs, p->shm_gbs,
            p->intra_lat_us, nnodes - 1, cores, inter, p->inter_lat_us * 1e-6 / 2, intra,
            p->intra_lat_us * 1e-6);
}

int sim_platform_temp(const fold_model_params_t *p, int nnodes, int cores, char *path,
                      size_t len)
{
    const char *dir = getenv("TMPDIR");
    if (snprintf(path, len, "%s/fold_sim-XXXXXX.xml", dir && *dir ? dir : "/tmp") >=
        (int)len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkstemps(path, 4);
    if (fd < 0) {
        return -1;
    }
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        close(fd);
        unlink(path);
        return -1;
    }
    sim_platform_write(f, p, nnodes, cores);
    if (fclose(f) != 0) {
        unlink(path);
        return -1;
    }
    return 0;
}

int sim_platform_apply_params(const char *text, fold_model_params_t *p)
{
    char *copy = strdup(text);
    if (copy == NULL) {
        return -1;
    }
    int status = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item != NULL && status == 0;
         item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ' || *item == '\n' || *item == '\t') {
            item++;
        }
        if (strcmp(item, "generic") == 0 || *item == '\0') {
            continue;
        }
        char *eq = strchr(item, '=');
        if (eq == NULL) {
            fprintf(stderr, "fold_sim: '%s' is not name=value\n", item);
            status = -1;
            break;
        }
        *eq = '\0';
        status = fold_model_set(p, item, eq + 1) == 0 ? 0 : -1;
    }
    free(copy);
    return status;
}
