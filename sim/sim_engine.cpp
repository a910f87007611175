/* SimGrid under the replay (sim_engine.h). C++ because only s4u waits for a
 * communication, an execution and a wake-up at once (Activity::wait_any_for). */
#include "sim_engine.h"

extern "C" {
#include "sim_run.h"
}

#include <simgrid/Exception.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

std::unique_ptr<sg4::Engine> engine;
std::vector<sg4::Host *> node_hosts;

/* "node-10" after "node-9": names compared with their runs of digits as numbers. */
bool natural_less(const std::string &a, const std::string &b)
{
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        if (std::isdigit((unsigned char)a[i]) && std::isdigit((unsigned char)b[j])) {
            size_t i2 = i, j2 = j;
            while (i2 < a.size() && std::isdigit((unsigned char)a[i2])) {
                i2++;
            }
            while (j2 < b.size() && std::isdigit((unsigned char)b[j2])) {
                j2++;
            }
            std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
            x.erase(0, std::min(x.find_first_not_of('0'), x.size() - 1));
            y.erase(0, std::min(y.find_first_not_of('0'), y.size() - 1));
            if (x.size() != y.size()) {
                return x.size() < y.size();
            }
            if (x != y) {
                return x < y;
            }
            i = i2;
            j = j2;
        } else {
            if (a[i] != b[j]) {
                return a[i] < b[j];
            }
            i++;
            j++;
        }
    }
    return a.size() - i < b.size() - j;
}

/* One rank's side of the simulator: what its actor waits for. */
struct rank_sim {
    sg4::ExecPtr cpu;    /* the step on its CPU, where its host has fewer cores than ranks */
    double cpu_end = INFINITY;   /* ... else when the step's slot ends */
    sg4::ExecPtr bell;   /* suspended: resumed to wake the actor from elsewhere */
    bool rung = false;
    bool running = false;
    std::vector<std::pair<uint32_t, sg4::CommPtr>> watch;   /* its sends in flight */
    std::vector<uint32_t> to_start;   /* its sends another rank's receive let go */
    sg4::Mailbox *box = nullptr;      /* its inbox: transfers to it start at once */
};

struct replay {
    sim_prog_t *g = nullptr;
    std::vector<char> shares_cores;   /* node -> its host has fewer cores than ranks */
    sim_run_t *run = nullptr;
    std::vector<rank_sim> ranks;
    int current = -1;   /* the rank whose actor runs */
};

/* On a core of its own a step's execution takes exactly its cost, so it is a timer of
 * the actor's (no activity for SimGrid to share); where ranks share the host's cores
 * it is an execution, which SimGrid slows as the cores are shared. */
void hook_start_cpu(void *arg, int rank, double seconds)
{
    auto *rp = static_cast<replay *>(arg);
    rank_sim &r = rp->ranks[rank];
    if (rp->shares_cores[(size_t)rp->g->topo->node_of[rank]]) {
        sg4::Host *host = sg4::this_actor::get_host();
        r.cpu = sg4::this_actor::exec_init(seconds * host->get_speed());
        r.cpu->start();
    } else {
        r.cpu_end = sg4::Engine::get_clock() + seconds;
    }
}

void hook_ring(void *arg, int rank)
{
    auto *rp = static_cast<replay *>(arg);
    rank_sim &r = rp->ranks[rank];
    if (rank != rp->current && r.running && r.bell != nullptr && !r.rung) {
        r.rung = true;
        r.bell->resume();
    }
}

/* The sender's actor starts each of its transfers, as it is the one that waits for
 * them: a receive that lets a send go hands it to the sender's actor, which starts it
 * at once (its bell rings at once). A transfer is a put into the receiver's inbox,
 * whose permanent receiver makes it start at once. Not Comm::sendto_async: SimGrid
 * keeps its transfers in one list of all in flight and searches the whole list as
 * each one ends, which grows with the ranks squared. */
void start_transfer(replay *rp, int sender, uint32_t send)
{
    const sim_step_t *st = &rp->g->steps[send];
    sg4::CommPtr c = rp->ranks[(size_t)st->peer].box->put_async(rp, st->amount);
    rp->ranks[(size_t)sender].watch.emplace_back(send, c);
}

/* Takes the transfers to `me` that have ended out of its inbox, which holds them until
 * its receiver takes them. */
void drain_inbox(rank_sim &me)
{
    while (me.box->ready()) {
        me.box->get<void>();
    }
}

void hook_start_msg(void *arg, int sender, uint32_t send, uint64_t, int)
{
    auto *rp = static_cast<replay *>(arg);
    if (sender == rp->current) {
        start_transfer(rp, sender, send);
    } else {
        rp->ranks[(size_t)sender].to_start.push_back(send);
        hook_ring(arg, sender);
    }
}

enum : int64_t { TAG_BELL = -1, TAG_CPU = -2 };

/* The activity of acts that ended first, or -1 after timeout seconds (< 0: none). */
ssize_t wait_any(const std::vector<sg4::ActivityPtr> &acts, double timeout)
{
    try {
        return sg4::Activity::wait_any_for(acts, timeout);
    } catch (const simgrid::TimeoutException &) {
        return -1;
    }
}

/* What the actor of `rank` does: wait for its CPU slot, its sends and its bell, and
 * hand each that ends to the replay's logic; between them, its timers. */
void rank_actor(replay *rp, int rank)
{
    rank_sim &me = rp->ranks[(size_t)rank];
    me.running = true;
    rp->current = rank;
    sim_run_start(rp->run, rank);
    std::vector<sg4::ActivityPtr> acts;
    std::vector<int64_t> tags, ended;
    while (!sim_run_rank_done(rp->run, rank)) {
        drain_inbox(me);
        for (uint32_t send : me.to_start) {
            start_transfer(rp, rank, send);
        }
        me.to_start.clear();
        if (me.bell == nullptr) {
            me.bell = sg4::this_actor::exec_init(0);
            me.bell->suspend();
            me.bell->start();
            me.rung = false;
        }
        acts.clear();
        tags.clear();
        acts.push_back(me.bell);
        tags.push_back(TAG_BELL);
        if (me.cpu != nullptr) {
            acts.push_back(me.cpu);
            tags.push_back(TAG_CPU);
        }
        for (auto &w : me.watch) {
            acts.push_back(w.second);
            tags.push_back(w.first);
        }
        const double due = std::min(sim_run_next_timer(rp->run, rank), me.cpu_end);
        const double now0 = sg4::Engine::get_clock();
        /* Ended activities are collected through waits (the later ones of timeout 0)
         * rather than tests: SimGrid drops an activity from its issuer's list when a
         * wait sees it end, and with tests the replays slowed as those lists grew. */
        ended.clear();
        for (ssize_t i = wait_any(acts, std::isinf(due) ? -1.0 : std::max(0.0, due - now0));
             i >= 0; i = acts.empty() ? -1 : wait_any(acts, 0)) {
            ended.push_back(tags[(size_t)i]);
            acts.erase(acts.begin() + i);
            tags.erase(tags.begin() + i);
        }
        rp->current = rank;
        const double now = sg4::Engine::get_clock();
        for (int64_t tag : ended) {
            if (tag == TAG_BELL) {
                me.bell = nullptr;
            } else if (tag == TAG_CPU) {
                me.cpu = nullptr;
                sim_run_cpu_done(rp->run, rank, now);
            } else {
                for (size_t k = 0; k < me.watch.size(); k++) {
                    if (me.watch[k].first == (uint32_t)tag) {
                        me.watch[k] = me.watch.back();
                        me.watch.pop_back();
                        break;
                    }
                }
                sim_run_arrived(rp->run, (uint32_t)tag, now);
            }
        }
        if (me.cpu_end <= now + 1e-12) {
            const double end = me.cpu_end;
            me.cpu_end = INFINITY;
            sim_run_cpu_done(rp->run, rank, end);
        }
        sim_run_fire(rp->run, rank, now);
        sim_run_kick(rp->run, rank, now);
    }
    me.running = false;
    drain_inbox(me);
    me.box->set_receiver(nullptr);
    if (me.bell != nullptr) {
        me.bell->cancel();
        me.bell = nullptr;
    }
}

}   // namespace

extern "C" int sim_engine_load(int argc, char **argv, const char *platform, char *why,
                               size_t len)
{
    try {
        engine = std::make_unique<sg4::Engine>(&argc, argv);
        engine->load_platform(platform);
    } catch (const std::exception &e) {
        std::snprintf(why, len, "SimGrid could not load platform '%s': %s", platform,
                      e.what());
        return -1;
    }
    return 0;
}

extern "C" int sim_engine_map_nodes(int nnodes, char *why, size_t len)
{
    std::vector<sg4::Host *> hosts = engine->get_all_hosts();
    std::sort(hosts.begin(), hosts.end(), [](const sg4::Host *a, const sg4::Host *b) {
        return natural_less(a->get_name(), b->get_name());
    });
    if (hosts.size() < (size_t)nnodes) {
        std::snprintf(why, len, "the platform has %zu hosts, the shape %d nodes", hosts.size(),
                      nnodes);
        return -1;
    }
    hosts.resize((size_t)nnodes);
    node_hosts = hosts;
    return 0;
}

extern "C" const char *sim_engine_host_name(int node)
{
    return node_hosts[(size_t)node]->get_cname();
}

extern "C" int sim_engine_host_cores(int node)
{
    return node_hosts[(size_t)node]->get_core_count();
}

extern "C" const char *sim_engine_host_prop(int node, const char *name)
{
    /* The host's own, else its zone's or an enclosing one's (a cluster's <prop>). */
    const char *v = node_hosts[(size_t)node]->get_property(name);
    const sg4::NetZone *root = engine->get_netzone_root();
    for (const sg4::NetZone *z = node_hosts[(size_t)node]->get_englobing_zone();
         v == nullptr && z != nullptr; z = z == root ? nullptr : z->get_parent()) {
        v = z->get_property(name);
    }
    return v;
}

extern "C" int sim_engine_run(sim_prog_t *g, const fold_model_params_t *p, char *why,
                              size_t len)
{
    replay rp;
    rp.g = g;
    rp.ranks.resize((size_t)g->size);
    rp.shares_cores.resize((size_t)g->topo->nnodes);
    for (int n = 0; n < g->topo->nnodes; n++) {
        rp.shares_cores[(size_t)n] = node_hosts[(size_t)n]->get_core_count() <
                                     fold_topo_ppn(g->topo, n);
    }
    sim_hooks_t hooks = {&rp, hook_start_cpu, hook_start_msg, hook_ring};
    rp.run = sim_run_new(g, p, &hooks);
    if (rp.run == nullptr) {
        std::snprintf(why, len, "out of memory");
        return -1;
    }
    int status = 0;
    try {
        for (int r = 0; r < g->size; r++) {
            std::string name = "rank-" + std::to_string(r);
            sg4::ActorPtr a = sg4::Actor::create(name, node_hosts[(size_t)g->topo->node_of[r]],
                                                 [&rp, r] { rank_actor(&rp, r); });
            rp.ranks[(size_t)r].box = sg4::Mailbox::by_name(name);
            rp.ranks[(size_t)r].box->set_receiver(a);
        }
        engine->run();
    } catch (const std::exception &e) {
        std::snprintf(why, len, "SimGrid failed: %s", e.what());
        status = -1;
    }
    if (status == 0 && sim_run_status(rp.run) != 0) {
        std::snprintf(why, len, "out of memory during the replay");
        status = -1;
    }
    if (status == 0 && sim_run_steps_done(rp.run) != g->nsteps) {
        std::snprintf(why, len, "%zu of %zu steps completed: the schedules wait for "
                      "something that never comes", sim_run_steps_done(rp.run), g->nsteps);
        status = -1;
    }
    sim_run_free(rp.run);
    return status;
}
