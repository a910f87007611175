/*
 * The default node name: gethostname() plus the inode of this process's network
 * namespace, so that namespaced "hosts" on one machine count as distinct nodes.
 */
#include "bootstrap.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void fold_bootstrap_default_node_name(char *buf, size_t len)
{
    char host[256];
    char suffix[32] = "";
    struct stat st;

    if (len == 0) {
        return;
    }
    if (gethostname(host, sizeof(host)) != 0) {
        snprintf(host, sizeof(host), "unknown");
    }
    host[sizeof(host) - 1] = '\0';
    if (stat("/proc/self/ns/net", &st) == 0) {
        snprintf(suffix, sizeof(suffix), "-%llu", (unsigned long long)st.st_ino);
    }

    /* Shorten the host name, never the suffix: the suffix tells namespaces apart. */
    size_t host_len = strlen(host);
    size_t suffix_len = strlen(suffix);
    if (host_len + suffix_len + 1 > len) {
        host_len = len > suffix_len + 1 ? len - suffix_len - 1 : 0;
    }
    snprintf(buf, len, "%.*s%s", (int)host_len, host, suffix);
}
