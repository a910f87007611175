/*
 * The algorithm registry (coll/alg_table.c): every entry is named, described, builds
 * something and is found by its name; the lookups refuse what is not there.
 */
#include <criterion/criterion.h>

#include "comm.h"

#include <string.h>

Test(registry, every_algorithm_is_named_described_and_found)
{
    int n = 0;
    for (int a = 0; fold_alg_all[a] != NULL; a++, n++) {
        const fold_alg_t *alg = fold_alg_all[a];
        cr_assert_not_null(alg->name);
        cr_expect(alg->allreduce || alg->reduce, "%s builds nothing", alg->name);
        cr_expect(alg->description != NULL && alg->description[0] != '\0', "%s",
                  alg->name);
        cr_expect_eq(fold_alg_find(alg->name), alg, "%s", alg->name);
        cr_expect_eq(fold_alg_builder(alg, FOLD_COLL_ALLREDUCE), alg->allreduce);
        cr_expect_eq(fold_alg_builder(alg, FOLD_COLL_REDUCE), alg->reduce);
        for (int b = 0; b < a; b++) {
            cr_expect_str_neq(fold_alg_all[b]->name, alg->name, "two entries named alike");
        }
    }
    cr_expect_geq(n, 1);
    cr_expect_null(fold_alg_find("no_such_algorithm"));
    cr_expect_null(fold_alg_find(NULL));
}

Test(registry, builders_where_the_algorithms_promise_them)
{
    cr_expect_not_null(fold_alg_find("ring")->allreduce);
    cr_expect_not_null(fold_alg_find("recursive_doubling")->allreduce);
    cr_expect_not_null(fold_alg_find("rabenseifner")->reduce);
    cr_expect_null(fold_alg_find("binomial")->allreduce, "binomial is a reduce tree");
}
