# cython: language_level=3
"""Placement kernel: node state as arrays, bucket index, filters, policies, bind/release.

The arrays are owned by :class:`placer.placement.cluster.Cluster` (numpy, dtypes from
``_typedefs.py``); :class:`Kernel` keeps raw pointers to them in a ``NodeState`` struct
so that the workers run ``nogil`` with no Python objects. Workers return status codes;
the ``def`` wrappers check shapes and raise.
"""
from libc.math cimport exp, floor
from libc.stdlib cimport calloc, free
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint64_t

import numpy as np

cimport numpy as cnp

cnp.import_array()

# Bumped (in pack.py) whenever the arrays or entry points change; setup.py compiles it in,
# so a build older than the Python sources is detected at import.
KERNEL_ABI = COMPILED_KERNEL_ABI

cdef extern from *:
    """
    static inline int placer_ctz(unsigned long long x) { return __builtin_ctzll(x); }
    static inline int placer_popcount(unsigned long long x) { return __builtin_popcountll(x); }
    /* The FGD study's DotProd score (dimext merge, norm max): with (free CPU, free GPU
       milli) / (128000, 8000) for the node and (CPU, GPU milli) / (128000, 8000) for the
       pod, trunc(100 (1 - dot / 2)); below -2^31 it is -2^31. The products are stored
       (volatile) so that no compiler fuses them into an FMA: the reference computes the
       same IEEE operations in this order. */
    static inline long long placer_dot_score(long long cpu_left, long long cpu_req,
                                             long long gpu_left, long long gpu_req) {
        volatile double cpu_term = ((double)cpu_left / 128000.0) * ((double)cpu_req / 128000.0);
        volatile double gpu_term = ((double)gpu_left / 8000.0) * ((double)gpu_req / 8000.0);
        double dot = cpu_term;
        double score;
        dot = dot + gpu_term;
        dot = dot / 2.0;
        score = 100.0 * (1.0 - dot);
        if (score <= -2147483648.0) return -2147483648LL;
        return (long long)score;
    }
    """
    int placer_ctz(unsigned long long x) nogil
    int placer_popcount(unsigned long long x) nogil
    long long placer_dot_score(long long cpu_left, long long cpu_req, long long gpu_left,
                               long long gpu_req) nogil

_POLICY_CODES = frozenset(int(code) for code in PolicyCode)

cdef int64_t NO_COST = 1 << 62
# cpu_left_floor at or above this: the buckets have had no node since derive_free_state set
# their floors to its ``untracked`` (pack.UNTRACKED_BIG, 2^60); a node's free CPU is far below
cdef int64_t EMPTY_BUCKETS = 1 << 59

cdef int32_t NIC_POINTS[NIC_CLASSES]
NIC_POINTS[:] = [50, 40, 30, 20, 10]


cdef inline uint64_t splitmix64(uint64_t* state) noexcept nogil:
    cdef uint64_t z
    state[0] += <uint64_t>0x9E3779B97F4A7C15
    z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef inline bint is_shared(const Pod* p) noexcept nogil:
    return p.gpus == 1 and p.milli < 1000


cdef inline int32_t shared_gpu(const NodeState* st, int32_t n, const Pod* p, int32_t nth) noexcept nogil:
    """The GPU a shared pod takes on node n: best fit (nth < 0) or the nth fitting GPU."""
    cdef int32_t i, best = -1, seen = 0
    cdef int16_t free, best_free = 1001
    cdef int64_t base = <int64_t>n * st.max_gpus
    for i in range(st.gpu_count[n]):
        free = st.gpu_free_milli[base + i]
        if free >= p.milli and st.gpu_free_mem[base + i] >= p.gpu_mem:
            if nth < 0:
                if free < best_free:
                    best_free = free
                    best = i
            else:
                if seen == nth:
                    return i
                seen += 1
    return best


cdef inline int32_t count_shared_gpus(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    cdef int32_t i, count = 0
    cdef int64_t base = <int64_t>n * st.max_gpus
    for i in range(st.gpu_count[n]):
        if st.gpu_free_milli[base + i] >= p.milli and st.gpu_free_mem[base + i] >= p.gpu_mem:
            count += 1
    return count


cdef inline uint64_t lowest_gpus(uint64_t free_mask, int32_t k) noexcept nogil:
    cdef uint64_t chosen = 0, rest = free_mask
    cdef int32_t i
    for i in range(k):
        chosen |= rest & (~rest + 1)
        rest &= rest - 1
    return chosen


cdef inline const uint16_t* choice_table(const NodeState* st, int32_t n, int32_t k) noexcept nogil:
    cdef int32_t t = st.kind_of[n]
    if t < 0 or k > MAX_K:
        return NULL
    return st.kind_choice[t * (MAX_K + 1) + k]


cdef inline uint64_t select_whole_gpus(const NodeState* st, int32_t n, int32_t k) noexcept nogil:
    """The GPUs a k-GPU pod takes on node n: the table's choice, else the lowest indices."""
    cdef const uint16_t* table = choice_table(st, n, k)
    if table == NULL:
        return lowest_gpus(st.free_mask[n], k)
    return table[st.free_mask[n]]


cdef inline int64_t set_score(const NodeState* st, int32_t n, int32_t k) noexcept nogil:
    """Pair-score sum of the set a k-GPU pod would take on node n (0 without topology)."""
    cdef const uint16_t* table
    if k < 2:
        return 0
    table = choice_table(st, n, k)
    if table == NULL:
        return 0
    return st.kind_score[st.kind_of[n]][table[st.free_mask[n]]]


cdef inline int64_t nic_affinity(const uint64_t* classes, uint64_t gpus) noexcept nogil:
    """Points of a NIC's best relation to any GPU of ``gpus``."""
    cdef int32_t c
    for c in range(NIC_CLASSES):
        if classes[c] & gpus:
            return NIC_POINTS[c]
    return 0


cdef uint64_t best_nics(const NodeState* st, int32_t t, uint64_t gpus, int32_t want, int64_t* total) noexcept nogil:
    """``want`` NICs for ``gpus``, paired one GPU at a time, and their summed points.

    Each pick takes the NIC closest to a GPU not yet paired (ties: closest to any GPU of
    the set, then the lowest NIC index) and pairs it with the lowest such GPU at that
    distance; once every GPU is paired the pairing starts over.
    """
    cdef uint64_t chosen = 0, served = 0, unserved, near
    cdef const uint64_t* classes
    cdef int32_t r, j, c, best_j
    cdef int64_t a, b, best_a, best_b
    total[0] = 0
    for r in range(want):
        unserved = gpus & ~served
        if unserved == 0:
            served = 0
            unserved = gpus
        best_j = -1
        best_a = -1
        best_b = -1
        for j in range(st.kind_nics[t]):
            if (chosen >> j) & 1:
                continue
            classes = &st.kind_nic_class[t][j * NIC_CLASSES]
            a = nic_affinity(classes, unserved)
            b = nic_affinity(classes, gpus)
            if a > best_a or (a == best_a and b > best_b):
                best_a = a
                best_b = b
                best_j = j
        if best_j < 0:
            break
        chosen |= (<uint64_t>1) << best_j
        total[0] += best_a
        classes = &st.kind_nic_class[t][best_j * NIC_CLASSES]
        for c in range(NIC_CLASSES):
            near = classes[c] & unserved
            if near:
                served |= near & (~near + 1)
                break
    return chosen


cdef uint64_t select_gpus_with_nics(const NodeState* st, int32_t n, int32_t k, int32_t want) noexcept nogil:
    """GPUs for a pod that also wants NICs: the closest NICs first, then the tiling objective."""
    cdef int32_t t = st.kind_of[n]
    cdef uint64_t m = st.free_mask[n], sub, best = 0
    cdef int64_t points, prim, sec, best_points = -1, best_prim = -1, best_sec = -1
    cdef const int32_t* score
    cdef const int32_t* split
    if t < 0 or k > MAX_K or st.kind_choice[t * (MAX_K + 1) + k] == NULL:
        return select_whole_gpus(st, n, k)
    score = st.kind_score[t]
    split = st.kind_split[t * (MAX_K + 1) + k]
    sub = m
    while True:
        if placer_popcount(sub) == k:
            best_nics(st, t, sub, want, &points)
            if k == 1:
                prim = -least_connected_cost(st.kind_pair[t], st.kind_gpus[t], m, sub)
                sec = 0
            else:
                prim = <int64_t>score[sub] + split[m ^ sub]
                sec = score[sub]
            if (points > best_points or (points == best_points and (
                    prim > best_prim or (prim == best_prim and (
                        sec > best_sec or (sec == best_sec and lex_before(sub, best))))))):
                best = sub
                best_points = points
                best_prim = prim
                best_sec = sec
        if sub == 0:
            break
        sub = (sub - 1) & m
    return best


cdef inline int64_t least_connected_cost(const int32_t* pair, int32_t n, uint64_t m, uint64_t one) noexcept nogil:
    cdef int32_t i = placer_ctz(one), j
    cdef uint64_t others = m & ~one
    cdef int64_t conn = 0
    while others:
        j = placer_ctz(others)
        others &= others - 1
        conn += pair[i * n + j]
    return conn


cdef inline bint short_of(int64_t free, int64_t need) noexcept nogil:
    """kube's NodeResourcesFit: a request above what is free; a pod that asks for none of a
    resource fits an over-committed node (free below 0)."""
    return need > 0 and free < need


cdef inline bint node_fits(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    if st.pods_free[n] < 1 or short_of(st.cpu_free[n], p.cpu) or short_of(st.mem_free[n], p.mem):
        return False
    if p.gpus == 0:
        return True
    if is_shared(p):
        # no GPU holds the share when all of them together do not (a full node costs no scan)
        return st.free_milli_sum[n] >= p.milli and shared_gpu(st, n, p, -1) >= 0
    return st.free_count[n] >= p.gpus and st.gpu_mem_cap[n] >= p.gpu_mem


cdef inline int64_t ceil_div(int64_t a, int64_t b) noexcept nogil:
    """ceil(a / b) for b > 0 and any sign of a (an over-committed node leaves negative CPU),
    whatever cdivision is."""
    if a >= 0:
        return (a + b - 1) // b
    return -((-a) // b)


cdef inline int64_t fit_cost(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    """The study's BestFit score turned into a cost: ceil((cpu_left + 16 gpu_left) / 2560)."""
    cdef int64_t cpu_left = 0
    cdef int64_t gpu_left = st.free_milli_sum[n] - <int64_t>p.gpus * p.milli
    if st.cpu_tracked[n]:
        cpu_left = st.cpu_free[n] - p.cpu
    return ceil_div(cpu_left + 16 * gpu_left, 2560)


cdef inline uint64_t bucket_word(const NodeState* st, const Pod* p, int32_t f, int32_t w) noexcept nogil:
    """Word w of the union of buckets (model, f) over the pod's models."""
    cdef uint64_t word = 0
    cdef int32_t m
    for m in range(st.n_models):
        if (p.models >> m) & 1 and f <= st.model_max[m]:
            word |= st.bucket_bits[<int64_t>(st.bucket_base[m] + f) * st.n_words + w]
    return word


cdef inline uint64_t room_mask(const NodeState* st, const Pod* p, int32_t w) noexcept nogil:
    """Word w of the nodes that may hold the pod's GPU share: for a share, those with some
    GPU milli free (in the bucket of no whole free GPU, most are full); else every node."""
    return st.room_bits[w] if is_shared(p) else ~(<uint64_t>0)


cdef inline int32_t min_free_count(const Pod* p) noexcept nogil:
    if p.gpus > 0 and not is_shared(p):
        return p.gpus
    return 0


cdef int32_t max_model_count(const NodeState* st, const Pod* p) noexcept nogil:
    cdef int32_t m, top = 0
    for m in range(st.n_models):
        if (p.models >> m) & 1 and st.model_max[m] > top:
            top = st.model_max[m]
    return top


cdef int32_t choose_first_fit(const NodeState* st, const Pod* p, const uint64_t* only) noexcept nogil:
    cdef int32_t w, f, n, fmin = min_free_count(p), fmax = max_model_count(st, p)
    cdef uint64_t word
    for w in range(st.n_words):
        word = 0
        for f in range(fmin, fmax + 1):
            word |= bucket_word(st, p, f, w)
        word &= p.eligible[w] & only[w] & room_mask(st, p, w)
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if node_fits(st, n, p):
                return n
    return -1


cdef inline int64_t cpu_left_floor(const NodeState* st, const Pod* p, int32_t f) noexcept nogil:
    """A lower bound of the CPU a pod would leave on any feasible node of buckets (·, f)."""
    cdef int32_t m
    cdef int64_t floor = NO_COST
    for m in range(st.n_models):
        if (p.models >> m) & 1 and f <= st.model_max[m]:
            if st.bucket_cpu_floor[st.bucket_base[m] + f] < floor:
                floor = st.bucket_cpu_floor[st.bucket_base[m] + f]
    floor -= p.cpu
    return floor if floor > 0 else 0


cdef inline int64_t score_ceiling(const NodeState* st, const Pod* p) noexcept nogil:
    """The highest set score a pod can get anywhere (0: set scores do not rank nodes)."""
    if p.gpus < 2 or p.gpus > MAX_K or is_shared(p):
        return 0
    return st.top_score[p.gpus]


cdef inline int64_t node_set_score(const NodeState* st, int32_t n, const Pod* p, int64_t ceiling) noexcept nogil:
    return set_score(st, n, p.gpus) if ceiling > 0 else 0


cdef int32_t choose_best_fit(const NodeState* st, const Pod* p, const uint64_t* only) noexcept nogil:
    cdef int32_t w, f, n, last_word, best = -1
    cdef int32_t fmin = min_free_count(p), fmax = max_model_count(st, p)
    cdef int64_t lower, floor, cost, best_cost = NO_COST, need = <int64_t>p.gpus * p.milli
    cdef int64_t ceiling = score_ceiling(st, p), sc, best_sc = -1
    cdef uint64_t word
    cdef bint done
    for f in range(fmin, fmax + 1):
        lower = 16 * (<int64_t>f * 1000 - need)
        if lower < 0:
            lower = 0
        if ceil_div(lower, 2560) > best_cost:
            break  # the GPU part alone only grows with f
        floor = cpu_left_floor(st, p, f)
        if floor >= EMPTY_BUCKETS:
            continue  # no node has been in these buckets since derive_free_state
        lower = ceil_div(lower + floor, 2560)
        if lower > best_cost:
            continue
        last_word = st.n_words - 1
        if lower == best_cost and best_sc >= ceiling:
            last_word = best // 64  # only a lower index can still win a tie
        done = False
        for w in range(last_word + 1):
            word = bucket_word(st, p, f, w) & p.eligible[w] & only[w] & room_mask(st, p, w)
            while word:
                n = w * 64 + placer_ctz(word)
                word &= word - 1
                if not node_fits(st, n, p):
                    continue
                cost = fit_cost(st, n, p)
                if cost > best_cost:
                    continue
                sc = node_set_score(st, n, p, ceiling)
                if cost < best_cost or sc > best_sc or (sc == best_sc and n < best):
                    best_cost = cost
                    best_sc = sc
                    best = n
                if cost == lower and sc >= ceiling:
                    done = True  # nothing later in this bucket can beat it
                    break
            if done:
                break
    return best


cdef int32_t choose_spread(const NodeState* st, const Pod* p, const uint64_t* only) noexcept nogil:
    cdef int32_t w, n, best = -1
    cdef int64_t cost, best_cost = -NO_COST, ceiling = score_ceiling(st, p), sc, best_sc = -1
    cdef uint64_t word
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if node_fits(st, n, p):
                cost = fit_cost(st, n, p)
                if cost < best_cost:
                    continue
                sc = node_set_score(st, n, p, ceiling)
                if cost > best_cost or sc > best_sc:
                    best_cost = cost
                    best_sc = sc
                    best = n
    return best


cdef int32_t choose_random(const NodeState* st, const Pod* p, const uint64_t* only, uint64_t* rng) noexcept nogil:
    cdef int32_t w, n, count = 0, target
    cdef uint64_t word
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if node_fits(st, n, p):
                count += 1
    if count == 0:
        return -1
    target = <int32_t>(splitmix64(rng) % <uint64_t>count)
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if node_fits(st, n, p):
                if target == 0:
                    return n
                target -= 1
    return -1


cdef inline void move_bucket(NodeState* st, int32_t n) noexcept nogil:
    """Keep node n in the bucket of its free GPU count and in the room bitset; lower the
    bucket's CPU floor.

    A floor only ever goes down (until the next rebuild), so it stays a valid lower bound.
    """
    cdef int32_t old = st.bucket_of[n]
    cdef int32_t new = st.bucket_base[st.model_id[n]] + st.free_count[n]
    cdef int32_t w = n // 64
    cdef uint64_t bit = (<uint64_t>1) << (n % 64)
    cdef int64_t cpu = st.cpu_free[n] if st.cpu_tracked[n] else 0
    if st.free_milli_sum[n] > 0:
        st.room_bits[w] |= bit
    else:
        st.room_bits[w] &= ~bit
    if cpu < st.bucket_cpu_floor[new]:
        st.bucket_cpu_floor[new] = cpu
    if old == new:
        return
    st.bucket_bits[<int64_t>old * st.n_words + w] &= ~bit
    st.bucket_bits[<int64_t>new * st.n_words + w] |= bit
    st.bucket_of[n] = new


cdef double fragment_with(const NodeState* st, int32_t n, int64_t cpu, int64_t f_old, int64_t f_new,
                          int32_t k) noexcept nogil:
    """F_n(M) of node n with ``cpu`` free CPU, one GPU of f_old free milli at f_new instead
    (f_old < 0: none) and k whole-free GPUs taken, from the node's per-type counts.

    CPU-only types and types of other GPU models count all idle milli; a type that fits
    (enough GPUs with its milli free, and its CPU) counts the free milli of the GPUs too
    small for it; a type that does not fit counts all idle milli. Types are summed in order.
    """
    cdef int32_t m, fit
    cdef int64_t idle = st.free_milli_sum[n] - 1000 * <int64_t>k, small, row = <int64_t>n * st.n_types
    cdef double total = 0
    if f_old >= 0:
        idle += f_new - f_old
    if idle == 0:
        return 0
    for m in range(st.n_types):
        if st.type_milli[m] == 0 or not ((st.type_models[m] >> st.model_id[n]) & 1):
            total += st.type_pop[m] * idle
            continue
        fit = st.type_fit[row + m] - k  # whole-free GPUs fit every type
        small = st.type_small[row + m]
        if f_old >= 0:
            if f_old >= st.type_milli[m]:
                fit -= 1
            else:
                small -= f_old
            if f_new >= st.type_milli[m]:
                fit += 1
            else:
                small += f_new
        if fit >= st.type_gpus[m] and cpu >= st.type_cpu[m]:
            total += st.type_pop[m] * small
        else:
            total += st.type_pop[m] * idle
    return total


cdef double refresh_fragment(NodeState* st, int32_t n) noexcept nogil:
    """Recount node n's per-type fitting GPUs and too-small milli; return its F_n(M)."""
    cdef int32_t m, g, fit, count = st.gpu_count[n]
    cdef int64_t base = <int64_t>n * st.max_gpus, row = <int64_t>n * st.n_types, small, free
    for m in range(st.n_types):
        fit = 0
        small = 0
        for g in range(count):
            free = st.gpu_free_milli[base + g]
            if free >= st.type_milli[m]:
                fit += 1
            else:
                small += free
        st.type_fit[row + m] = fit
        st.type_small[row + m] = small
    return fragment_with(st, n, st.cpu_free[n], -1, 0, 0)


cdef inline int32_t fgd_score(double before, double after) noexcept nogil:
    """The study's integer score: floor(100 sigmoid((F - F') / 1000))."""
    return <int32_t>floor(100.0 / (1.0 + exp(-(before - after) / 1000.0)))


cdef inline double stranded(const NodeState* st, int32_t n, int64_t cpu, int64_t idle) noexcept nogil:
    """Idle milli of node n beyond what ``cpu`` free CPU can serve at pack_cpu_per_gpu."""
    cdef double left
    if not st.cpu_tracked[n]:
        return 0
    left = idle - cpu * 1000.0 / st.pack_cpu_per_gpu
    return left if left > 0 else 0


cdef inline double node_measure(const NodeState* st, int32_t n, int64_t cpu, int64_t f_old, int64_t f_new,
                                int32_t k, bint pack) noexcept nogil:
    """F_n(M) after the change fragment_with describes; with ``pack``, plus the idle milli
    the free CPU cannot serve at pack_cpu_per_gpu (fgd-pack's measure)."""
    cdef int64_t idle = st.free_milli_sum[n] - 1000 * <int64_t>k
    cdef double frag = fragment_with(st, n, cpu, f_old, f_new, k)
    if not pack:
        return frag
    if f_old >= 0:
        idle += f_new - f_old
    return frag + stranded(st, n, cpu, idle)


cdef int32_t fgd_node_score(const NodeState* st, int32_t n, const Pod* p, int32_t* gpu, bint pack) noexcept nogil:
    """FGD score (``pack``: fgd-pack score) of p on node n, which fits it; for a shared pod
    also its GPU."""
    cdef int32_t g, h, best = -1, score
    cdef int64_t base = <int64_t>n * st.max_gpus, free
    cdef int64_t cpu = st.cpu_free[n] - p.cpu
    cdef double before = st.node_frag[n] if st.n_types else 0
    cdef double after
    cdef bint seen
    gpu[0] = -1
    if pack:
        before += stranded(st, n, st.cpu_free[n], st.free_milli_sum[n])
    if p.gpus == 0:
        return fgd_score(before, node_measure(st, n, cpu, -1, 0, 0, pack))
    if pack:
        before -= st.pack_pressure_weight * st.pack_pressure[st.model_id[n]] * p.gpus * p.milli
    if not is_shared(p):
        return fgd_score(before, node_measure(st, n, cpu, -1, 0, p.gpus, pack))
    for g in range(st.gpu_count[n]):
        free = st.gpu_free_milli[base + g]
        if free < p.milli or st.gpu_free_mem[base + g] < p.gpu_mem:
            continue
        seen = False
        for h in range(g):  # a GPU like an earlier fitting one scores the same
            if (st.gpu_free_milli[base + h] == free and st.gpu_free_mem[base + h] >= p.gpu_mem):
                seen = True
                break
        if seen:
            continue
        after = node_measure(st, n, cpu, free, free - p.milli, 0, pack)
        if pack:
            after += st.pack_regret_weight * 1000.0 * st.pack_regret[(p.milli // 10) * 101 + free // 10]
        score = fgd_score(before, after)
        if score > best:
            best = score
            gpu[0] = g
    return best


cdef inline int32_t node_rank(const NodeState* st, int32_t n) noexcept nogil:
    return st.rank[n] if st.rank != NULL else n


# The FGD study's other baselines (SIM pkg/simulator/plugin/*_score.go): integer scores in
# 0..100 of a node that fits the pod, the highest wins, ties by node_rank.

cdef inline int64_t trunc_div(int64_t a, int64_t b) noexcept nogil:
    """a / b rounded toward zero (Go's integer division), b > 0, whatever cdivision is."""
    if a >= 0:
        return a // b
    return -((-a) // b)


cdef inline int64_t dot_product_score(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    """DotProd: trunc(100 (1 - (cpu_left c / 128000² + gpu_left g / 8000²) / 2)).

    cpu_left is the node's free CPU (0 when untracked), gpu_left its free GPU milli; c and g
    the pod's CPU and total GPU milli. The least loaded product wins.
    """
    cdef int64_t cpu_left = st.cpu_free[n] if st.cpu_tracked[n] else 0
    cdef int64_t need = <int64_t>p.gpus * p.milli if p.gpus > 0 else 0
    return placer_dot_score(cpu_left, p.cpu, st.free_milli_sum[n], need)


cdef inline int64_t gpu_packing_score(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    """GpuPacking: partly used GPUs first, then whole GPUs of a used node, then idle nodes.

    CPU-only pods: 0. A node whose GPUs are all whole-free: max(33 - F, F) with F its GPUs.
    Otherwise the pod's GPUs as the study scans them (fitting GPUs by ascending free milli:
    for a shared pod the best-fit GPU, for a k-GPU pod k whole-free GPUs): when j > 0 of
    them are whole-free, max(50 - j, 33); else max(100 - (Σ ⌊free·100/1000⌋) / 10, 50).
    """
    cdef int32_t g, count = st.gpu_count[n]
    cdef int64_t free
    if p.gpus == 0:
        return 0
    if st.free_count[n] == count:
        return 33 - count if 33 - count > count else count
    if not is_shared(p):
        return 50 - p.gpus if 50 - p.gpus > 33 else 33
    g = shared_gpu(st, n, p, -1)
    free = st.gpu_free_milli[<int64_t>n * st.max_gpus + g]
    if free == 1000:
        return 49
    free = 100 - (free * 100 // 1000) // 10
    return free if free > 50 else 50


cdef inline int64_t gpu_clustering_score(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    """GpuClustering: ⌊25 (8000 - g) / 8000⌋ (toward zero; g the node's free GPU milli)
    plus 75 when the node hosts only pods of the pod's tag, 50 when that tag among others,
    25 when no GPU pod, 0 when only other tags. CPU-only pods: 0."""
    cdef int32_t tag
    cdef int64_t term, kinds
    if p.gpus == 0:
        return 0
    tag = 0 if is_shared(p) else p.gpus
    term = trunc_div(25 * (8000 - <int64_t>st.free_milli_sum[n]), 8000)
    kinds = st.tag_kinds[n]
    if tag < st.n_tags and st.tag_count[<int64_t>n * st.n_tags + tag] > 0:
        return term + (75 if kinds == 1 else 50)
    return term + (25 if kinds == 0 else 0)


cdef inline bint is_scored(int32_t policy) noexcept nogil:
    """Whether the policy chooses the node of the highest score (choose_scored, study_score)."""
    return (policy == POLICY_FGD or policy == POLICY_DOT_PRODUCT or policy == POLICY_GPU_PACKING
            or policy == POLICY_GPU_CLUSTERING or policy == POLICY_FGD_PACK)


cdef inline int64_t study_score(const NodeState* st, int32_t n, const Pod* p, int32_t policy) noexcept nogil:
    """The score of node n for p under a scored policy (is_scored): FGD, fgd-pack or one of
    the study's baselines."""
    cdef int32_t gpu
    if policy == POLICY_FGD or policy == POLICY_FGD_PACK:
        return fgd_node_score(st, n, p, &gpu, policy == POLICY_FGD_PACK)
    if policy == POLICY_DOT_PRODUCT:
        return dot_product_score(st, n, p)
    if policy == POLICY_GPU_PACKING:
        return gpu_packing_score(st, n, p)
    return gpu_clustering_score(st, n, p)  # POLICY_GPU_CLUSTERING


cdef inline int64_t cached_score(NodeState* st, int32_t n, const Pod* p, int32_t policy) noexcept nogil:
    """study_score, from the cache while node n is unchanged since it was computed for p's shape."""
    cdef int64_t i
    cdef int32_t score
    if st.n_shapes == 0 or p.shape < 0:
        return study_score(st, n, p, policy)
    i = <int64_t>p.shape * st.n_nodes + n
    if st.cache_stamp[i] == st.node_version[n] + 1:
        return st.cache_score[i]
    score = <int32_t>study_score(st, n, p, policy)
    st.cache_stamp[i] = st.node_version[n] + 1
    st.cache_score[i] = score
    return score


cdef int32_t choose_scored(NodeState* st, const Pod* p, const uint64_t* only, int32_t policy) noexcept nogil:
    """The node of the highest score of a scored policy (FGD, fgd-pack or a baseline); ties
    by node_rank."""
    cdef int32_t w, n, best = -1
    cdef int64_t score, best_score = 0
    cdef uint64_t word
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if not node_fits(st, n, p):
                continue
            score = cached_score(st, n, p, policy)
            if best < 0 or score > best_score or (score == best_score and node_rank(st, n) < node_rank(st, best)):
                best_score = score
                best = n
    return best


cdef void apply(NodeState* st, int32_t n, const Pod* p, uint64_t gpus, int32_t sign,
                int32_t pod_slots, bint share) noexcept nogil:
    cdef double after
    apply_resources(st, n, p, gpus, sign, pod_slots, share)
    st.node_version[n] += 1
    if st.n_types:
        after = refresh_fragment(st, n)
        st.frag_total += after - st.node_frag[n]
        st.node_frag[n] = after


cdef void apply_resources(NodeState* st, int32_t n, const Pod* p, uint64_t gpus, int32_t sign,
                          int32_t pod_slots, bint share) noexcept nogil:
    """Bind (sign 1) or release (sign -1) what a pod holds on node n.

    ``gpus`` is the mask of whole GPUs held, or the one GPU of a share (``share``) of
    ``p.milli`` milli and ``p.gpu_mem`` MiB; ``pod_slots`` is 1 for a whole pod, 0 for a part.
    """
    cdef int64_t base = <int64_t>n * st.max_gpus
    cdef int32_t i, k
    cdef uint64_t rest
    st.pods_free[n] -= sign * pod_slots
    st.cpu_free[n] -= sign * p.cpu
    st.mem_free[n] -= sign * p.mem
    if gpus == 0:
        move_bucket(st, n)
        return
    count_tag(st, n, 0 if share else placer_popcount(gpus), sign)
    if share:
        i = placer_ctz(gpus)
        if sign > 0 and st.gpu_free_milli[base + i] == 1000:
            st.free_mask[n] &= ~gpus
            st.free_count[n] -= 1
        st.gpu_free_milli[base + i] -= sign * p.milli
        st.gpu_free_mem[base + i] -= sign * p.gpu_mem
        st.free_milli_sum[n] -= sign * p.milli
        if sign < 0 and st.gpu_free_milli[base + i] == 1000:
            st.free_mask[n] |= gpus
            st.free_count[n] += 1
    else:
        k = placer_popcount(gpus)
        rest = gpus
        while rest:
            i = placer_ctz(rest)
            rest &= rest - 1
            st.gpu_free_milli[base + i] = 0 if sign > 0 else 1000
        if sign > 0:
            st.free_mask[n] &= ~gpus
            st.free_count[n] -= k
        else:
            st.free_mask[n] |= gpus
            st.free_count[n] += k
        st.free_milli_sum[n] -= sign * 1000 * k
    move_bucket(st, n)


cdef inline void count_tag(NodeState* st, int32_t n, int32_t tag, int32_t sign) noexcept nogil:
    """One pod of GPU tag ``tag`` more (sign 1) or less (sign -1) on node n."""
    cdef int32_t* c = &st.tag_count[<int64_t>n * st.n_tags + tag]
    if sign > 0:
        c[0] += 1
        if c[0] == 1:
            st.tag_kinds[n] += 1
    else:
        c[0] -= 1
        if c[0] == 0:
            st.tag_kinds[n] -= 1


cdef void count_reasons(const NodeState* st, const Pod* p, const uint64_t* only, int32_t* out) noexcept nogil:
    """Per resource, how many statically eligible nodes fall short of the pod."""
    cdef int32_t w, n, cpu = 0, mem = 0, pods = 0, gpu = 0, gpu_mem = 0  # counted apart from out: no aliasing
    cdef uint64_t word
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if short_of(st.cpu_free[n], p.cpu):
                cpu += 1
            if short_of(st.mem_free[n], p.mem):
                mem += 1
            if st.pods_free[n] < 1:
                pods += 1
            if p.gpus == 0:
                continue
            if is_shared(p):
                if shared_gpu(st, n, p, -1) < 0:
                    if count_shared_milli(st, n, p):
                        gpu_mem += 1
                    else:
                        gpu += 1
            elif st.free_count[n] < p.gpus:
                gpu += 1
            elif st.gpu_mem_cap[n] < p.gpu_mem:
                gpu_mem += 1
    out[R_CPU] += cpu
    out[R_MEM] += mem
    out[R_PODS] += pods
    out[R_GPU] += gpu
    out[R_GPU_MEM] += gpu_mem


cdef inline bint count_shared_milli(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    """Whether some GPU has the pod's milli free (whatever its memory)."""
    cdef int32_t i
    cdef int64_t base = <int64_t>n * st.max_gpus
    for i in range(st.gpu_count[n]):
        if st.gpu_free_milli[base + i] >= p.milli:
            return True
    return False


cdef int32_t place_one(NodeState* st, const Pod* p, int32_t policy, const uint64_t* only,
                       uint64_t* rng, uint64_t* chosen, uint64_t* nics) noexcept nogil:
    cdef int32_t n
    if policy == POLICY_FIRST_FIT:
        n = choose_first_fit(st, p, only)
    elif policy == POLICY_BEST_FIT:
        n = choose_best_fit(st, p, only)
    elif policy == POLICY_SPREAD:
        n = choose_spread(st, p, only)
    elif is_scored(policy):
        n = choose_scored(st, p, only, policy)
    elif policy == POLICY_RANDOM:
        n = choose_random(st, p, only, rng)
    else:
        return -1  # not a policy: the def wrappers refuse such codes (Kernel._check_policy)
    if n < 0:
        return -1
    take(st, n, p, policy, rng, chosen, nics)
    return n


cdef void take(NodeState* st, int32_t n, const Pod* p, int32_t policy, uint64_t* rng,
               uint64_t* chosen, uint64_t* nics) noexcept nogil:
    """Choose the pod's GPUs (and NICs) on node n, which fits it, and bind it there."""
    cdef int32_t gpu
    cdef const uint16_t* table
    cdef int64_t points
    if p.gpus == 0:
        chosen[0] = 0
    elif is_shared(p):
        if policy == POLICY_RANDOM:
            gpu = shared_gpu(st, n, p, <int32_t>(splitmix64(rng) % <uint64_t>count_shared_gpus(st, n, p)))
        elif policy == POLICY_FGD or policy == POLICY_FGD_PACK:
            fgd_node_score(st, n, p, &gpu, policy == POLICY_FGD_PACK)
        else:
            gpu = shared_gpu(st, n, p, -1)
            if st.gpu_free_milli[<int64_t>n * st.max_gpus + gpu] == 1000:
                table = choice_table(st, n, 1)  # a whole free GPU: the least-connected one
                if table != NULL:
                    gpu = placer_ctz(table[st.free_mask[n]])
        chosen[0] = (<uint64_t>1) << gpu
    elif p.nics > 0:
        chosen[0] = select_gpus_with_nics(st, n, p.gpus, p.nics)
    else:
        chosen[0] = select_whole_gpus(st, n, p.gpus)
    nics[0] = 0
    if p.nics > 0 and st.kind_of[n] >= 0:
        nics[0] = best_nics(st, st.kind_of[n], chosen[0], p.nics, &points)
    apply(st, n, p, chosen[0], 1, 1, is_shared(p))


# ---------------------------------------------------------------------------------------
# Inter-pod rules (kube-scheduler's PodTopologySpread and InterPodAffinity filters): counts
# per topology domain per constraint, the nodes each constraint lets through kept current.

cdef inline bint rel_node_passes(const RelView* r, int32_t c, int32_t n) noexcept nogil:
    """Whether node n passes constraint c under its counts now."""
    cdef int32_t d = r.dom_of[<int64_t>r.con_key[c] * r.n_nodes + n]
    cdef int32_t kind = r.con_kind[c], low
    if kind == REL_ZERO:
        return d < 0 or r.count[r.con_off[c] + d] == 0
    if d < 0:
        return False
    if kind == REL_AFFINITY:
        return r.count[r.con_off[c] + d] > 0
    low = 0 if r.con_domains[c] < r.con_min_domains[c] else r.con_min[c]
    return <int64_t>r.count[r.con_off[c] + d] + r.con_self[c] - low <= r.con_max_skew[c]


cdef inline void rel_set_bit(RelView* r, int32_t c, int32_t n) noexcept nogil:
    cdef uint64_t bit = (<uint64_t>1) << (n % 64)
    cdef uint64_t* word = &r.con_pass[<int64_t>c * r.n_words + n // 64]
    if rel_node_passes(r, c, n):
        word[0] |= bit
    else:
        word[0] &= ~bit


cdef int32_t rel_minimum(const RelView* r, int32_t c) noexcept nogil:
    """The least count over the constraint's domains in the map (2^31 - 1: none)."""
    cdef int32_t key = r.con_key[c], d, low = 2147483647
    cdef int32_t doms = r.key_dom_base[key + 1] - r.key_dom_base[key]
    for d in range(doms):
        if r.in_map[r.con_off[c] + d] and r.count[r.con_off[c] + d] < low:
            low = r.count[r.con_off[c] + d]
    return low


cdef void rel_refresh(RelView* r, int32_t c) noexcept nogil:
    """Recompute the constraint's minimum and the pass bit of every node."""
    cdef int32_t n
    if r.con_kind[c] == REL_SPREAD:
        r.con_min[c] = rel_minimum(r, c)
    for n in range(r.n_nodes):
        rel_set_bit(r, c, n)


cdef void rel_add(RelView* r, int32_t c, int32_t n, int32_t sign) noexcept nogil:
    """A pod that constraint c counts is placed on (sign 1) or taken off (-1) node n."""
    cdef int32_t key = r.con_key[c], d, g, i, old_min
    if not ((r.con_counted[<int64_t>c * r.n_words + n // 64] >> (n % 64)) & 1):
        return
    d = r.dom_of[<int64_t>key * r.n_nodes + n]
    if d < 0:
        return
    r.count[r.con_off[c] + d] += sign
    if r.con_group[c] >= 0:
        r.group_total[r.con_group[c]] += sign
    if r.con_kind[c] == REL_SPREAD:
        old_min = r.con_min[c]
        r.con_min[c] = rel_minimum(r, c)
        if r.con_min[c] != old_min:
            for i in range(r.n_nodes):
                rel_set_bit(r, c, i)
            return
    g = r.key_dom_base[key] + d
    for i in range(r.dom_node_start[g], r.dom_node_start[g + 1]):
        rel_set_bit(r, c, r.dom_nodes[i])


cdef void rel_add_pod(RelView* r, int32_t pod, int32_t n, int32_t sign) noexcept nogil:
    cdef int32_t i
    for i in range(r.add_start[pod], r.add_start[pod + 1]):
        rel_add(r, r.add_con[i], n, sign)


cdef inline const uint64_t* rel_need_bits(const RelView* r, int32_t i) noexcept nogil:
    """The nodes need entry i lets through: an affinity term of a pod that matches its own
    terms passes every node with the key while no pod matches yet (kube's first-pod rule)."""
    cdef int32_t c = r.need_con[i]
    if r.need_self[i] and r.con_group[c] >= 0 and r.group_total[r.con_group[c]] == 0:
        return r.has_key + <int64_t>r.con_key[c] * r.n_words
    return r.con_pass + <int64_t>c * r.n_words


cdef const uint64_t* rel_filter(RelView* r, int32_t pod, const uint64_t* eligible) noexcept nogil:
    """The pod's eligible nodes under its rules (``r.scratch``), or ``eligible`` without rules."""
    cdef int32_t i, w
    cdef const uint64_t* bits
    if r.need_start[pod] == r.need_start[pod + 1]:
        return eligible
    for w in range(r.n_words):
        r.scratch[w] = eligible[w]
    for i in range(r.need_start[pod], r.need_start[pod + 1]):
        bits = rel_need_bits(r, i)
        for w in range(r.n_words):
            r.scratch[w] &= bits[w]
    return r.scratch


cdef int32_t rel_first_failure(const RelView* r, int32_t pod, int32_t n) noexcept nogil:
    """The R_* counter of the first of the pod's constraints node n fails; -1: none."""
    cdef int32_t i, c
    cdef const uint64_t* bits
    for i in range(r.need_start[pod], r.need_start[pod + 1]):
        c = r.need_con[i]
        bits = rel_need_bits(r, i)
        if not ((bits[n // 64] >> (n % 64)) & 1):
            if r.con_kind[c] == REL_SPREAD and r.dom_of[<int64_t>r.con_key[c] * r.n_nodes + n] < 0:
                return R_SPREAD_LABEL
            return r.con_reason[c]
    return -1


cdef void rel_count_reasons(const NodeState* st, const RelView* r, int32_t pod, const Pod* p,
                            const uint64_t* only, int32_t* out) noexcept nogil:
    """Per inter-pod reason, the statically eligible nodes that fit the pod's resources but
    fail one of its rules (kube runs these filters after NodeResourcesFit)."""
    cdef int32_t w, n, why
    cdef uint64_t word
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if node_fits(st, n, p):
                why = rel_first_failure(r, pod, n)
                if why >= 0:
                    out[why] += 1


cdef class Relations:
    """The inter-pod rules of one batch as typed arrays (built by
    :func:`placer.kernel.relations.compile_relations`; the names are the fields of
    ``RelView`` in ``_core.pxd``). The counts and pass bitsets change as the kernel places
    and takes back pods; every constraint's pass bits are computed here from its counts."""

    def __init__(self, dict arrays, int32_t n_nodes, int32_t n_words):
        cdef int32_t n_cons = arrays["con_kind"].shape[0], n_keys = arrays["key_dom_base"].shape[0] - 1
        cdef int32_t n_pods = arrays["need_start"].shape[0] - 1, c
        cdef int64_t cells = arrays["count"].shape[0]
        cdef int32_t n_groups = arrays["group_total"].shape[0]
        self.arrays = arrays
        r = &self.view
        r.n_cons = n_cons
        r.n_nodes = n_nodes
        r.n_words = n_words
        r.n_pods = n_pods
        r.dom_of = _data(arrays["dom_of"], <int64_t>n_keys * n_nodes, <int32_t*>NULL)
        r.key_dom_base = _data(arrays["key_dom_base"], n_keys + 1, <int32_t*>NULL)
        r.dom_node_start = _data(arrays["dom_node_start"], r.key_dom_base[n_keys] + 1, <int32_t*>NULL)
        r.dom_nodes = _data(arrays["dom_nodes"], r.dom_node_start[r.key_dom_base[n_keys]], <int32_t*>NULL)
        r.has_key = _data(arrays["has_key"], <int64_t>n_keys * n_words, <uint64_t*>NULL)
        r.con_key = _data(arrays["con_key"], n_cons, <int32_t*>NULL)
        r.con_kind = _data(arrays["con_kind"], n_cons, <int32_t*>NULL)
        r.con_reason = _data(arrays["con_reason"], n_cons, <int32_t*>NULL)
        r.con_off = _data(arrays["con_off"], n_cons, <int32_t*>NULL)
        r.con_group = _data(arrays["con_group"], n_cons, <int32_t*>NULL)
        r.con_max_skew = _data(arrays["con_max_skew"], n_cons, <int32_t*>NULL)
        r.con_min_domains = _data(arrays["con_min_domains"], n_cons, <int32_t*>NULL)
        r.con_self = _data(arrays["con_self"], n_cons, <int32_t*>NULL)
        r.con_counted = _data(arrays["con_counted"], <int64_t>n_cons * n_words, <uint64_t*>NULL)
        r.in_map = _data(arrays["in_map"], cells, <uint8_t*>NULL)
        r.count = _data(arrays["count"], cells, <int32_t*>NULL)
        r.con_pass = _data(arrays["con_pass"], <int64_t>n_cons * n_words, <uint64_t*>NULL)
        r.con_min = _data(arrays["con_min"], n_cons, <int32_t*>NULL)
        r.con_domains = _data(arrays["con_domains"], n_cons, <int32_t*>NULL)
        r.group_total = _data(arrays["group_total"], n_groups, <int64_t*>NULL)
        r.need_start = _data(arrays["need_start"], n_pods + 1, <int32_t*>NULL)
        r.need_con = _data(arrays["need_con"], r.need_start[n_pods], <int32_t*>NULL)
        r.need_self = _data(arrays["need_self"], r.need_start[n_pods], <uint8_t*>NULL)
        r.add_start = _data(arrays["add_start"], n_pods + 1, <int32_t*>NULL)
        r.add_con = _data(arrays["add_con"], r.add_start[n_pods], <int32_t*>NULL)
        r.scratch = _data(arrays["scratch"], n_words, <uint64_t*>NULL)
        for c in range(n_cons):
            if (r.con_key[c] < 0 or r.con_key[c] >= n_keys or r.con_kind[c] < REL_ZERO or r.con_kind[c] > REL_SPREAD
                    or r.con_off[c] < 0 or r.con_off[c] + r.key_dom_base[r.con_key[c] + 1]
                    - r.key_dom_base[r.con_key[c]] > cells
                    or r.con_reason[c] < R_SPREAD_LABEL or r.con_reason[c] >= N_REASONS
                    or r.con_group[c] >= n_groups):
                raise ValueError(f"relations constraint {c} is out of range")
        for c in range(r.need_start[n_pods]):
            if r.need_con[c] < 0 or r.need_con[c] >= n_cons:
                raise ValueError("relations need entry out of range")
        for c in range(r.add_start[n_pods]):
            if r.add_con[c] < 0 or r.add_con[c] >= n_cons:
                raise ValueError("relations add entry out of range")
        with nogil:
            for c in range(n_cons):
                rel_refresh(r, c)

    @property
    def n_pods(self):
        """Pods of the batch the relations were compiled for."""
        return self.view.n_pods

    def passes(self, int32_t pod, int32_t node):
        """The R_* counter of the first rule of ``pod`` that ``node`` fails now, -1: none."""
        if pod < 0 or pod >= self.view.n_pods or node < 0 or node >= self.view.n_nodes:
            raise IndexError("pod or node out of range")
        return rel_first_failure(&self.view, pod, node)

    def failures(self, int32_t pod):
        """Per node, the R_* counter of the first rule of ``pod`` it fails now, -1: none (int32)."""
        if pod < 0 or pod >= self.view.n_pods:
            raise IndexError("pod out of range")
        out_arr = np.full(self.view.n_nodes, -1, dtype=np.int32)
        cdef int32_t[::1] out = out_arr
        cdef int32_t n
        with nogil:
            for n in range(self.view.n_nodes):
                out[n] = rel_first_failure(&self.view, pod, n)
        return out_arr

    def add(self, int32_t pod, int32_t node, int32_t sign):
        """Count ``pod`` as placed on (``sign`` 1) or taken off (-1) ``node``."""
        if pod < 0 or pod >= self.view.n_pods or node < 0 or node >= self.view.n_nodes:
            raise IndexError("pod or node out of range")
        rel_add_pod(&self.view, pod, node, 1 if sign > 0 else -1)


cdef class PodBatch:
    """The pods of one kernel call as typed columns, checked once when built.

    Parameters
    ----------
    gpus, milli, gpu_mem, nics : ndarray of int32
        Whole GPUs (or 1 for a share), milli per GPU, GPU memory per GPU, NICs.
    cpu, mem : ndarray of int64
        CPU milli and memory MiB.
    models : ndarray of uint64
        Allowed GPU model ids as a bitmask.
    klass : ndarray of int32
        Row of ``eligible`` of each pod.
    group_end : ndarray of int32
        Pods ``i .. group_end[i]-1`` are one all-or-nothing group when ``i`` starts one.
    eligible : ndarray of uint64, shape (classes, words)
        Statically eligible nodes per class, as bitsets.
    """

    def __init__(self, gpus, milli, gpu_mem, cpu, mem, nics, models, klass, group_end, eligible):
        cdef int32_t n = len(gpus)
        if len(eligible.shape) != 2:
            raise ValueError("eligible is one node bitset per class (classes x words)")
        self.view.size = n
        self.view.n_words = eligible.shape[1]
        self.view.gpus = _column(gpus, n, <int32_t*>NULL)
        self.view.milli = _column(milli, n, <int32_t*>NULL)
        self.view.gpu_mem = _column(gpu_mem, n, <int32_t*>NULL)
        self.view.cpu = _column(cpu, n, <int64_t*>NULL)
        self.view.mem = _column(mem, n, <int64_t*>NULL)
        self.view.nics = _column(nics, n, <int32_t*>NULL)
        self.view.models = _column(models, n, <uint64_t*>NULL)
        self.view.klass = _column(klass, n, <int32_t*>NULL)
        self.view.group_end = _column(group_end, n, <int32_t*>NULL)
        self.view.eligible = _data(eligible, <Py_ssize_t>eligible.size, <uint64_t*>NULL)
        self.size = n
        self.arrays = (gpus, milli, gpu_mem, cpu, mem, nics, models, klass, group_end, eligible)

    @property
    def gpus(self):
        """GPUs per pod (int32)."""
        return self.arrays[0]

    @property
    def klass(self):
        """Eligibility class (row of ``eligible``) per pod (int32)."""
        return self.arrays[7]

    def shape_columns(self):
        """(gpus, milli, gpu_mem, cpu) per pod as one int64 array: what the score cache keys on."""
        return np.stack([self.arrays[0], self.arrays[1], self.arrays[2], self.arrays[3]], axis=1)


cdef class Kernel:
    """Node state of one cluster and the placement workers over it."""

    def __dealloc__(self):
        free(self.st.kind_pair)
        free(self.st.kind_score)
        free(self.st.kind_split)
        free(self.st.kind_choice)
        free(self.st.kind_nic_class)

    def __init__(self, dict arrays, int n_models):
        cdef int32_t n_nodes = arrays["free_mask"].shape[0]
        cdef int32_t n_kinds = arrays["kind_gpus"].shape[0], k
        cdef Py_ssize_t n_buckets = arrays["bucket_bits"].shape[0]
        self._arrays = arrays
        self._tables = []
        self._workload = None
        self.st.n_types = 0
        self.st.frag_total = 0
        self.st.rank = NULL
        self.st.pack_regret = NULL
        self._node_version = np.zeros(n_nodes, dtype=np.int32)
        self.st.node_version = _data(self._node_version, n_nodes, <int32_t*>NULL)
        self.st.n_shapes = 0
        self.st.cache_stamp = NULL
        self.st.cache_score = NULL
        self.st.n_kinds = n_kinds
        self.st.kind_of = _data(arrays["kind_of"], n_nodes, <int32_t*>NULL)
        self.st.kind_gpus = _data(arrays["kind_gpus"], n_kinds, <int32_t*>NULL)
        self.st.kind_nics = _data(arrays["kind_nics"], n_kinds, <int32_t*>NULL)
        self.st.kind_pair = <const int32_t**>calloc(n_kinds + 1, sizeof(void*))
        self.st.kind_score = <const int32_t**>calloc(n_kinds + 1, sizeof(void*))
        self.st.kind_split = <const int32_t**>calloc((n_kinds + 1) * (MAX_K + 1), sizeof(void*))
        self.st.kind_choice = <const uint16_t**>calloc((n_kinds + 1) * (MAX_K + 1), sizeof(void*))
        self.st.kind_nic_class = <const uint64_t**>calloc(n_kinds + 1, sizeof(void*))
        if (self.st.kind_pair == NULL or self.st.kind_score == NULL or self.st.kind_split == NULL
                or self.st.kind_choice == NULL or self.st.kind_nic_class == NULL):
            raise MemoryError()
        for k in range(MAX_K + 1):
            self.st.top_score[k] = 0
        self.st.n_nodes = n_nodes
        self.st.max_gpus = arrays["gpu_free_milli"].shape[1]
        self.st.n_words = arrays["bucket_bits"].shape[1]
        self.st.n_models = n_models
        self.st.free_mask = _data(arrays["free_mask"], n_nodes, <uint64_t*>NULL)
        self.st.free_count = _data(arrays["free_count"], n_nodes, <uint8_t*>NULL)
        self.st.gpu_count = _data(arrays["gpu_count"], n_nodes, <uint8_t*>NULL)
        self.st.gpu_free_milli = _data(arrays["gpu_free_milli"], n_nodes * self.st.max_gpus, <int16_t*>NULL)
        self.st.gpu_free_mem = _data(arrays["gpu_free_mem"], n_nodes * self.st.max_gpus, <int32_t*>NULL)
        self.st.gpu_mem_cap = _data(arrays["gpu_mem_cap"], n_nodes, <int32_t*>NULL)
        self.st.free_milli_sum = _data(arrays["free_milli_sum"], n_nodes, <int32_t*>NULL)
        self.st.cpu_free = _data(arrays["cpu_free"], n_nodes, <int64_t*>NULL)
        self.st.mem_free = _data(arrays["mem_free"], n_nodes, <int64_t*>NULL)
        self.st.pods_free = _data(arrays["pods_free"], n_nodes, <int32_t*>NULL)
        self.st.cpu_tracked = _data(arrays["cpu_tracked"], n_nodes, <uint8_t*>NULL)
        self.st.model_id = _data(arrays["model_id"], n_nodes, <int32_t*>NULL)
        self.st.model_max = _data(arrays["model_max"], n_models, <int32_t*>NULL)
        self.st.bucket_base = _data(arrays["bucket_base"], n_models, <int32_t*>NULL)
        self.st.bucket_of = _data(arrays["bucket_of"], n_nodes, <int32_t*>NULL)
        self.st.bucket_cpu_floor = _data(arrays["bucket_cpu_floor"], n_buckets, <int64_t*>NULL)
        self.st.bucket_bits = _data(arrays["bucket_bits"], n_buckets * self.st.n_words, <uint64_t*>NULL)
        self.st.room_bits = _data(arrays["room_bits"], self.st.n_words, <uint64_t*>NULL)
        self.st.n_tags = self.st.max_gpus + 1
        self.st.tag_count = _data(arrays["tag_count"], n_nodes * self.st.n_tags, <int32_t*>NULL)
        self.st.tag_kinds = _data(arrays["tag_kinds"], n_nodes, <int32_t*>NULL)
        self._all_nodes = np.zeros(self.st.n_words, dtype=np.uint64)
        if n_nodes:
            self._all_nodes[:] = ~np.uint64(0)

    def set_gpu_tables(self, int32_t kind, int32_t k, cnp.ndarray pair, cnp.ndarray score,
                       cnp.ndarray split, cnp.ndarray choice, int64_t top):
        """Use the tables of ``gpusets.GpuTables`` for k-GPU pods on nodes of ``kind``.

        ``top`` is the best k-set score of the kind; the arrays are kept alive here.
        """
        cdef int32_t g
        if kind < 0 or kind >= self.st.n_kinds or k < 1 or k > MAX_K:
            raise IndexError("kind or set size out of range")
        g = self.st.kind_gpus[kind]
        self._tables.append((pair, score, split, choice))
        self.st.kind_pair[kind] = _data(pair, g * g, <int32_t*>NULL)
        self.st.kind_score[kind] = _data(score, 1 << g, <int32_t*>NULL)
        self.st.kind_split[kind * (MAX_K + 1) + k] = _data(split, 1 << g, <int32_t*>NULL)
        self.st.kind_choice[kind * (MAX_K + 1) + k] = _data(choice, 1 << g, <uint16_t*>NULL)
        if top > self.st.top_score[k]:
            self.st.top_score[k] = top

    def set_workload(self, dict types, cnp.ndarray node_frag, cnp.ndarray fit, cnp.ndarray small):
        """Track F_n(M) of a target workload in ``node_frag`` (float64 per node), from now on.

        ``types`` holds ``cpu`` (int64), ``milli``, ``gpus`` (int32), ``models`` (uint64
        mask of allowed model ids) and ``pop`` (float64) per task type; ``fit`` (int32) and
        ``small`` (int64), nodes × types, hold the per-type counts the kernel keeps.
        """
        cdef int32_t t = types["cpu"].shape[0], n
        cdef double total = 0
        self._workload = (types, node_frag, fit, small)
        self.st.type_fit = _data(fit, self.st.n_nodes * t, <int32_t*>NULL)
        self.st.type_small = _data(small, self.st.n_nodes * t, <int64_t*>NULL)
        self.st.type_cpu = _data(types["cpu"], t, <int64_t*>NULL)
        self.st.type_milli = _data(types["milli"], t, <int32_t*>NULL)
        self.st.type_gpus = _data(types["gpus"], t, <int32_t*>NULL)
        self.st.type_models = _data(types["models"], t, <uint64_t*>NULL)
        self.st.type_pop = _data(types["pop"], t, <double*>NULL)
        self.st.node_frag = _data(node_frag, self.st.n_nodes, <double*>NULL)
        self.st.n_types = t
        with nogil:
            for n in range(self.st.n_nodes):
                self.st.node_frag[n] = refresh_fragment(&self.st, n)
                total += self.st.node_frag[n]
        self.st.frag_total = total

    def set_packing(self, double cpu_per_gpu, cnp.ndarray regret, cnp.ndarray pressure,
                    double regret_weight, double pressure_weight):
        """Use a ``placer.workload.packing.PackingGuide`` for ``fgd-pack`` (needs a workload too).

        ``regret`` is float64 [101 * 101] (pod units × free units), ``pressure`` float64 per
        model id; both are kept alive here.
        """
        if cpu_per_gpu <= 0:
            raise ValueError("cpu_per_gpu must be positive")
        self._packing = (regret, pressure)
        self.st.pack_cpu_per_gpu = cpu_per_gpu
        self.st.pack_regret_weight = regret_weight
        self.st.pack_pressure_weight = pressure_weight
        self.st.pack_pressure = _data(pressure, self.st.n_models, <double*>NULL)
        self.st.pack_regret = _data(regret, 101 * 101, <double*>NULL)

    def _check_policy(self, int policy):
        if policy not in _POLICY_CODES:
            raise ValueError(f"unknown policy code {policy}: expected one of PolicyCode's values")
        if policy == POLICY_FGD_PACK and self.st.pack_regret == NULL:
            raise ValueError("fgd-pack needs set_packing() first")

    def fragment_total(self):
        """The running sum of F_n(M) over the nodes (0 without a workload)."""
        return self.st.frag_total

    def has_gpu_tables(self, int32_t kind, int32_t k):
        """Whether tables for k-GPU pods on nodes of ``kind`` are set."""
        return self.st.kind_choice[kind * (MAX_K + 1) + k] != NULL

    def set_nics(self, int32_t kind, cnp.ndarray classes):
        """NIC relations of a kind: uint64 ``[nics, 5]``, GPU masks per PIX, PXB, PHB, NODE, SYS."""
        if kind < 0 or kind >= self.st.n_kinds:
            raise IndexError("kind out of range")
        self._tables.append(classes)
        self.st.kind_nic_class[kind] = _data(classes, self.st.kind_nics[kind] * NIC_CLASSES, <uint64_t*>NULL)

    def place_batch(self, PodBatch pods, int policy, cnp.ndarray rng, restrict=None,
                    bint reasons=True, rank=None, frag_trace=None, shapes=None, cache=None,
                    Relations relations=None, int32_t relations_from=0):
        """Place a batch of pods in order, binding each; groups are all or nothing.

        Parameters
        ----------
        pods : PodBatch
            The pods, their eligible nodes and their all-or-nothing groups.
        policy : int
            A policy's ``code`` (:data:`placer.policies.REGISTRY`).
        rng : ndarray of uint64, shape (1,)
            SplitMix64 state, advanced in place.
        restrict : ndarray of uint64, shape (words,), optional
            Only these nodes may be used.
        reasons : bool
            Count per-resource shortfalls for each pod that fails.
        rank : ndarray of int32, optional
            Tie order of the nodes for the ranked policies (``Policy.ranked``; lower
            wins); node index when omitted.
        frag_trace : ndarray of float64, optional
            Filled with the cluster's fragment F(M) after each pod (needs a workload).
        shapes : ndarray of int32, optional
            Shape index per pod (pods of one index have equal ``gpus``, ``milli``,
            ``gpu_mem`` and ``cpu``): a scored policy then keeps each node's score per
            shape until the node changes. The caller passes them only for a policy whose
            score depends on nothing else (``Policy.cached``: ``fgd``, ``fgd-pack``).
        cache : (ndarray, ndarray) of int32, optional
            With ``shapes``: the cache's stamps and scores, each of at least
            (max shape + 1) × nodes cells, to keep scores across calls with the same shape
            indices (default: a fresh cache for this call). The caller zeroes the stamps
            whenever a score could change without its node changing (a new packing guide).
        relations : Relations, optional
            The batch's inter-pod rules: each pod goes only where its rules pass now, and
            counts in the rules it matches once placed (taken back with a failed group).
        relations_from : int
            The relations' index of the batch's first pod (a batch placed in parts).

        Returns
        -------
        node : ndarray of int32
            Chosen node per pod, -1 when not placed.
        gpus : ndarray of uint64
            GPU mask per placed pod.
        failed_at : ndarray of int32
            For a pod of a failed group, the index of the pod that found no node; -1 else.
        reason_counts : ndarray of int32, shape (pods, 10)
            For the pod that failed, the resource shortfall counts
            (``reasons.RESOURCE_REASONS``), then the nodes that fit its resources but fail
            an inter-pod rule (``reasons.RELATIONAL_REASONS``).
        nics : ndarray of uint64
            NIC mask per placed pod (bit j = NIC j of the node's kind).
        """
        cdef int32_t n_pods = pods.size
        cdef const uint64_t[::1] allowed = self._all_nodes if restrict is None else restrict
        cdef uint64_t[::1] rng_state = rng
        out_node_arr = np.full(n_pods, -1, dtype=np.int32)
        out_gpus_arr = np.zeros(n_pods, dtype=np.uint64)
        out_nics_arr = np.zeros(n_pods, dtype=np.uint64)
        failed_arr = np.full(n_pods, -1, dtype=np.int32)
        counts_arr = np.zeros((n_pods, N_REASONS), dtype=np.int32)
        cdef int32_t[::1] out_node = out_node_arr
        cdef uint64_t[::1] out_gpus = out_gpus_arr
        cdef uint64_t[::1] out_nics = out_nics_arr
        cdef int32_t[::1] failed = failed_arr
        cdef int32_t[:, ::1] counts = counts_arr
        cdef double* trace = NULL
        cdef const int32_t[::1] shape_of = shapes if shapes is not None else None
        cdef int32_t n_shapes = 0
        if frag_trace is not None:
            trace = _data(frag_trace, n_pods, <double*>NULL)
        if shapes is not None and n_pods:
            if shape_of.shape[0] != n_pods:
                raise ValueError("one shape per pod")
            n_shapes = int(shapes.max()) + 1
            if cache is None:
                stamp_arr = np.zeros(<int64_t>n_shapes * self.st.n_nodes, dtype=np.int32)
                score_arr = np.zeros(<int64_t>n_shapes * self.st.n_nodes, dtype=np.int32)
            else:
                stamp_arr, score_arr = cache
                if (stamp_arr.shape[0] < <int64_t>n_shapes * self.st.n_nodes
                        or score_arr.shape[0] != stamp_arr.shape[0]):
                    raise ValueError("the cache needs (max shape + 1) x nodes cells, as many stamps as scores")
            self.st.cache_stamp = _data(stamp_arr, <Py_ssize_t>stamp_arr.shape[0], <int32_t*>NULL)
            self.st.cache_score = _data(score_arr, <Py_ssize_t>score_arr.shape[0], <int32_t*>NULL)
        if allowed.shape[0] != self.st.n_words or (n_pods and pods.view.n_words != self.st.n_words):
            raise ValueError("bitset width does not match the cluster")
        self._check_policy(policy)
        self.st.rank = NULL
        if rank is not None:
            self._rank = rank
            self.st.rank = _data(rank, self.st.n_nodes, <int32_t*>NULL)
        cdef RelView* rel = NULL
        if relations is not None:
            if (relations.view.n_nodes != self.st.n_nodes or relations_from < 0
                    or relations_from + n_pods > relations.view.n_pods):
                raise ValueError("the relations are not of this cluster and batch")
            rel = &relations.view
        self.st.n_shapes = n_shapes
        try:
            self._place_all(&pods.view, policy, allowed, rng_state, out_node, out_gpus, out_nics, failed,
                            counts, reasons, trace, shape_of, rel, relations_from)
        finally:
            self.st.n_shapes = 0
            self.st.cache_stamp = NULL
            self.st.cache_score = NULL
        return out_node_arr, out_gpus_arr, failed_arr, counts_arr, out_nics_arr

    cdef void _place_all(self, const BatchView* b, int policy, const uint64_t[::1] allowed,
                         uint64_t[::1] rng_state, int32_t[::1] out_node, uint64_t[::1] out_gpus,
                         uint64_t[::1] out_nics, int32_t[::1] failed, int32_t[:, ::1] counts, bint reasons,
                         double* trace, const int32_t[::1] shape_of, RelView* rel, int32_t rel_from) noexcept:
        cdef int32_t i, j, k, end, n
        cdef Pod p
        cdef const uint64_t* static_eligible
        with nogil:
            i = 0
            while i < b.size:
                end = b.group_end[i]
                for j in range(i, end):
                    load_pod(&p, b, j)
                    if self.st.n_shapes:
                        p.shape = shape_of[j]
                    static_eligible = p.eligible
                    if rel != NULL:
                        p.eligible = rel_filter(rel, j + rel_from, p.eligible)
                    n = place_one(&self.st, &p, policy, &allowed[0], &rng_state[0], &out_gpus[j],
                                  &out_nics[j])
                    out_node[j] = n
                    if n >= 0 and rel != NULL:
                        rel_add_pod(rel, j + rel_from, n, 1)
                    if n < 0:
                        p.eligible = static_eligible
                        if reasons:
                            count_reasons(&self.st, &p, &allowed[0], &counts[j, 0])
                            if rel != NULL:
                                rel_count_reasons(&self.st, rel, j + rel_from, &p, &allowed[0], &counts[j, 0])
                        if rel != NULL:
                            for k in range(j - 1, i - 1, -1):
                                rel_add_pod(rel, k + rel_from, out_node[k], -1)
                        undo_group(&self.st, b, i, j, out_node, out_gpus, failed, end)
                        for k in range(i, end):
                            out_nics[k] = 0
                        break
                if trace != NULL:
                    for k in range(i, end):
                        trace[k] = self.st.frag_total
                i = end

    def node_scores(self, PodBatch pods, int policy):
        """The score of every node for the first pod of ``pods`` (nothing is bound).

        Higher is better under every policy: a scored policy's own score (``fgd``,
        ``fgd-pack`` and the study's baselines); for ``best-fit`` the negated cost, then
        the GPU-set score (``spread``: the cost, then the set score); for ``first-fit``
        the negated node index; for ``random`` 0 (every node that fits is as good).
        ``pods`` is as in :meth:`place_batch`. Returns int64 per node, with ``-2**63`` for
        a node that is not eligible or does not fit the pod.
        """

        cdef int32_t n
        cdef Pod p
        cdef int64_t ceiling
        self._check_policy(policy)
        if pods.size < 1 or pods.view.n_words != self.st.n_words:
            raise ValueError("one pod and bitsets of the cluster's width are needed")
        out_arr = np.full(self.st.n_nodes, np.iinfo(np.int64).min, dtype=np.int64)
        cdef int64_t[::1] out = out_arr
        load_pod(&p, &pods.view, 0)
        p.nics = 0
        ceiling = score_ceiling(&self.st, &p)
        for n in range(self.st.n_nodes):
            if not ((p.eligible[n // 64] >> (n % 64)) & 1) or not node_fits(&self.st, n, &p):
                continue
            if is_scored(policy):
                out[n] = study_score(&self.st, n, &p, policy)
            elif policy == POLICY_BEST_FIT:
                out[n] = -(fit_cost(&self.st, n, &p) << 32) + node_set_score(&self.st, n, &p, ceiling)
            elif policy == POLICY_SPREAD:
                out[n] = (fit_cost(&self.st, n, &p) << 32) + node_set_score(&self.st, n, &p, ceiling)
            elif policy == POLICY_FIRST_FIT:
                out[n] = -n
            else:
                out[n] = 0
        return out_arr

    def place_on(self, PodBatch pods, cnp.ndarray node_of_pod, int policy, rng=None, Relations relations=None):
        """Place pod j on node ``node_of_pod[j]`` (GPUs and NICs chosen there); all or nothing.

        ``pods`` is as in :meth:`place_batch` (``models``, ``klass`` and ``group_end`` are
        not used: the caller chose the nodes). ``policy`` chooses the GPUs on the node as
        it does in :meth:`place_batch` (a shared pod's GPU differs under ``random``,
        ``fgd`` and ``fgd-pack``); ``rng`` is the SplitMix64 state ``random`` draws from,
        advanced in place (omitted: a stream started at 0). ``relations``: the pods' inter-pod
        rules (compiled for exactly these pods), which each node must pass in turn. Returns
        ``(gpus, nics, failed)``: the GPU and NIC masks per pod, and the index of the first
        pod that did not fit (-1: all placed; then nothing is bound).
        """
        cdef int32_t n_pods = pods.size
        cdef const BatchView* b = &pods.view
        cdef const int32_t[::1] where = node_of_pod
        out_gpus_arr = np.zeros(n_pods, dtype=np.uint64)
        out_nics_arr = np.zeros(n_pods, dtype=np.uint64)
        cdef uint64_t[::1] out_gpus = out_gpus_arr
        cdef uint64_t[::1] out_nics = out_nics_arr
        cdef uint64_t[::1] rng_state = np.zeros(1, dtype=np.uint64) if rng is None else rng
        cdef int32_t j, k, n, failed = -1
        cdef Pod p
        cdef RelView* rel = NULL
        if relations is not None:
            if relations.view.n_nodes != self.st.n_nodes or relations.view.n_pods != n_pods:
                raise ValueError("the relations are not of this cluster and these pods")
            rel = &relations.view
        if where.shape[0] != n_pods:
            raise ValueError("one node per pod")
        if rng_state.shape[0] != 1:
            raise ValueError("rng is one uint64 state")
        self._check_policy(policy)
        for j in range(n_pods):
            if where[j] < 0 or where[j] >= self.st.n_nodes:
                raise IndexError("node index out of range")
        with nogil:
            for j in range(n_pods):
                load_resources(&p, b, j)
                n = where[j]
                if not node_fits(&self.st, n, &p) or (rel != NULL and rel_first_failure(rel, j, n) >= 0):
                    failed = j
                    break
                take(&self.st, n, &p, policy, &rng_state[0], &out_gpus[j], &out_nics[j])
                if rel != NULL:
                    rel_add_pod(rel, j, n, 1)
            if failed >= 0:
                for k in range(failed - 1, -1, -1):
                    if rel != NULL:
                        rel_add_pod(rel, k, where[k], -1)
                    load_resources(&p, b, k)
                    apply(&self.st, where[k], &p, out_gpus[k], -1, 1, is_shared(&p))
                    out_gpus[k] = 0
                    out_nics[k] = 0
        return out_gpus_arr, out_nics_arr, failed

    def bind(self, int32_t node, int32_t milli, int32_t gpu_mem, int64_t cpu, int64_t mem,
             uint64_t gpu_mask, int32_t sign, int32_t pod_slots, bint share):
        """Bind (``sign`` 1) or release (``sign`` -1) what a pod holds on ``node``; no checks.

        ``gpu_mask`` holds whole GPUs, or the one GPU of a share of ``milli`` (``share``).
        """
        cdef Pod p
        if node < 0 or node >= self.st.n_nodes:
            raise IndexError("node index out of range")
        p.gpus = 1 if share else placer_popcount(gpu_mask)
        p.milli = milli
        p.gpu_mem = gpu_mem
        p.cpu = cpu
        p.mem = mem
        apply(&self.st, node, &p, gpu_mask, 1 if sign > 0 else -1, pod_slots, share)


cdef inline void load_resources(Pod* p, const BatchView* b, int32_t j) noexcept nogil:
    p.gpus = b.gpus[j]
    p.milli = b.milli[j]
    p.gpu_mem = b.gpu_mem[j]
    p.cpu = b.cpu[j]
    p.mem = b.mem[j]
    p.nics = b.nics[j]
    p.shape = -1


cdef inline void load_pod(Pod* p, const BatchView* b, int32_t j) noexcept nogil:
    load_resources(p, b, j)
    p.models = b.models[j]
    p.eligible = b.eligible + <int64_t>b.klass[j] * b.n_words


cdef void undo_group(NodeState* st, const BatchView* b, int32_t start, int32_t failed_pod,
                     int32_t[::1] out_node, uint64_t[::1] out_gpus, int32_t[::1] failed,
                     int32_t end) noexcept nogil:
    cdef int32_t k
    cdef Pod p
    for k in range(failed_pod - 1, start - 1, -1):
        load_resources(&p, b, k)
        apply(st, out_node[k], &p, out_gpus[k], -1, 1, is_shared(&p))
    for k in range(start, end):
        out_node[k] = -1
        out_gpus[k] = 0
        failed[k] = failed_pod


ctypedef fused array_value:  # the C types of the arrays NodeState and BatchView point into
    uint8_t
    uint16_t
    int16_t
    int32_t
    int64_t
    uint64_t
    double


cdef inline char _kind(array_value* like) noexcept:
    """NumPy's kind letter of C type ``array_value``."""
    cdef char kind = b"u"
    if array_value is double:
        kind = b"f"
    elif array_value is int16_t or array_value is int32_t or array_value is int64_t:
        kind = b"i"
    return kind


cdef array_value* _data(arr, Py_ssize_t size, array_value* like) except NULL:
    """The values of the array ``arr``, checked to be ``size`` native values of the C type of
    ``like`` (a typed NULL: the struct field's C type, so that only ``_core.pxd`` names the dtype)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"kernel array must be a numpy array, got {type(arr).__name__}")
    cdef cnp.ndarray a = <cnp.ndarray>arr
    if (a.descr.kind != _kind(like) or cnp.PyArray_ITEMSIZE(a) != sizeof(array_value)
            or not cnp.PyArray_ISNOTSWAPPED(a) or not cnp.PyArray_IS_C_CONTIGUOUS(a) or cnp.PyArray_SIZE(a) != size):
        raise ValueError(f"kernel array must be C-contiguous {chr(_kind(like))}{sizeof(array_value)} of size {size}")
    return <array_value*>cnp.PyArray_DATA(a)


cdef array_value* _column(arr, Py_ssize_t size, array_value* like) except NULL:
    """:func:`_data` of one column of a pod batch (a 1-d array, one value per pod)."""
    if not isinstance(arr, np.ndarray) or cnp.PyArray_NDIM(<cnp.ndarray>arr) != 1:
        raise ValueError(f"a pod batch column is a 1-d array of {chr(_kind(like))}{sizeof(array_value)}")
    if cnp.PyArray_DIM(<cnp.ndarray>arr, 0) != size:
        raise ValueError("every column of a pod batch needs one value per pod")
    return _data(arr, size, like)


# ---------------------------------------------------------------------------------------
# GPU sets inside one node (pair scores of a node type with at most 16 GPUs).
#
# subset_score[m]: the sum of the pair scores inside GPU mask m.
# split[m]: the best split of m into sets of k GPUs plus one set of |m| mod k.
# A choice for free mask m and size k compares candidate sets S by
#   tiling:   (subset_score[S] + split[m ^ S], subset_score[S]), then the lexicographically
#             smallest index list;
#   best-set: (subset_score[S], split[m ^ S]), then the same.
# Size 1 takes the least-connected GPU of m (lowest pair-score sum to the rest of m).

MAX_TABLE_GPUS = 16


cdef inline bint lex_before(uint64_t a, uint64_t b) noexcept nogil:
    """Whether the ascending index list of a comes before that of b."""
    cdef uint64_t d = a ^ b
    return (d & (~d + 1) & a) != 0


cdef inline bint better_set(int64_t p1, int64_t s1, uint64_t a, int64_t p2, int64_t s2, uint64_t b) noexcept nogil:
    if p1 != p2:
        return p1 > p2
    if s1 != s2:
        return s1 > s2
    return lex_before(a, b)


cdef uint64_t least_connected(const int32_t* pair, int32_t n, uint64_t m) noexcept nogil:
    cdef uint64_t rest = m, others
    cdef int32_t i, j
    cdef int64_t conn, best_conn = -1
    cdef uint64_t best = 0
    while rest:
        i = placer_ctz(rest)
        rest &= rest - 1
        conn = 0
        others = m & ~((<uint64_t>1) << i)
        while others:
            j = placer_ctz(others)
            others &= others - 1
            conn += pair[i * n + j]
        if best_conn < 0 or conn < best_conn:
            best_conn = conn
            best = (<uint64_t>1) << i
    return best


cdef struct Combos:
    # The r-element subsets of a bit pool, in Gosper order over the pool's positions.
    int32_t positions[64]
    int32_t size
    uint64_t pattern
    uint64_t limit


cdef inline bint combos_start(Combos* c, uint64_t pool, int32_t r) noexcept nogil:
    c.size = 0
    while pool:
        c.positions[c.size] = placer_ctz(pool)
        c.size += 1
        pool &= pool - 1
    if r < 0 or r > c.size:
        return False
    c.pattern = ((<uint64_t>1) << r) - 1
    c.limit = (<uint64_t>1) << c.size
    return True


cdef inline uint64_t combos_mask(const Combos* c) noexcept nogil:
    cdef uint64_t x = c.pattern, out = 0
    while x:
        out |= (<uint64_t>1) << c.positions[placer_ctz(x)]
        x &= x - 1
    return out


cdef inline bint combos_next(Combos* c) noexcept nogil:
    cdef uint64_t x = c.pattern, low, ripple
    if x == 0:
        return False
    low = x & (~x + 1)
    ripple = x + low
    c.pattern = (((ripple ^ x) >> 2) // low) | ripple
    return c.pattern < c.limit


cdef uint64_t choose_in_mask(const int32_t* score, const int32_t* split, const int32_t* pair,
                             int32_t n, int32_t k, uint64_t m, uint64_t required,
                             int32_t objective) noexcept nogil:
    """The best k-set S with required ⊆ S ⊆ m (0 when none)."""
    cdef uint64_t s, best = 0
    cdef int64_t prim, sec, best_prim = -1, best_sec = -1
    cdef bint found = False
    cdef Combos c
    if (required & ~m) or placer_popcount(m) < k:
        return 0
    if k == 1 and required == 0:
        return least_connected(pair, n, m)
    if not combos_start(&c, m & ~required, k - placer_popcount(required)):
        return 0
    while True:
        s = combos_mask(&c) | required
        if objective == OBJECTIVE_TILING:
            prim = <int64_t>score[s] + split[m ^ s]
            sec = score[s]
        else:
            prim = score[s]
            sec = split[m ^ s]
        if not found or better_set(prim, sec, s, best_prim, best_sec, best):
            found = True
            best = s
            best_prim = prim
            best_sec = sec
        if not combos_next(&c):
            break
    return best


def derive_free_state(dict arrays, int64_t untracked):
    """Fill the state derived from per-GPU free milli, in place: free masks, free whole-GPU
    counts, free milli sums, each node's bucket (model, free count), the bucket bitsets, the
    room bitset (nodes with some milli free) and the buckets' CPU floors (``untracked`` for an empty bucket; a node that does not track
    CPU counts 0). The dtypes are ``placer.kernel.pack``'s."""
    cdef const int16_t[:, ::1] milli = arrays["gpu_free_milli"]
    cdef uint64_t[::1] free_mask = arrays["free_mask"]
    cdef uint8_t[::1] free_count = arrays["free_count"]
    cdef int32_t[::1] milli_sum = arrays["free_milli_sum"]
    cdef const int32_t[::1] bucket_base = arrays["bucket_base"]
    cdef const int32_t[::1] model_id = arrays["model_id"]
    cdef int32_t[::1] bucket_of = arrays["bucket_of"]
    cdef uint64_t[:, ::1] bits = arrays["bucket_bits"]
    cdef int64_t[::1] floor = arrays["bucket_cpu_floor"]
    cdef const int64_t[::1] cpu_free = arrays["cpu_free"]
    cdef const uint8_t[::1] cpu_tracked = arrays["cpu_tracked"]
    cdef uint64_t[::1] room = arrays["room_bits"]
    cdef Py_ssize_t n = milli.shape[0], stride = milli.shape[1], i, g, b
    cdef uint64_t mask
    cdef int32_t count, total
    cdef int64_t cpu
    if stride > 64 or bits.shape[1] * 64 < n or room.shape[0] != bits.shape[1]:
        raise ValueError("more than 64 GPUs per node, or bitsets narrower than the nodes")
    for i in range(n):
        if model_id[i] < 0 or model_id[i] >= bucket_base.shape[0]:
            raise IndexError("model id out of range")
    with nogil:
        bits[:, :] = 0
        room[:] = 0
        floor[:] = untracked
        for i in range(n):
            mask = 0
            count = 0
            total = 0
            for g in range(stride):
                total += milli[i, g]
                if milli[i, g] == 1000:
                    mask |= (<uint64_t>1) << g
                    count += 1
            free_mask[i] = mask
            free_count[i] = <uint8_t>count
            milli_sum[i] = total
            b = bucket_base[model_id[i]] + count
            bucket_of[i] = <int32_t>b
            bits[b, i // 64] |= (<uint64_t>1) << (i % 64)
            if total > 0:
                room[i // 64] |= (<uint64_t>1) << (i % 64)
            cpu = cpu_free[i] if cpu_tracked[i] else 0
            if cpu < floor[b]:
                floor[b] = cpu


def gpu_subset_scores(const int32_t[:, ::1] pair):
    """Pair-score sum of every GPU mask of an n-GPU node (n ≤ 16), as int32[2**n]."""
    cdef int32_t n = pair.shape[0]
    if n > MAX_TABLE_GPUS or pair.shape[1] != n:
        raise ValueError("pair scores must be square with at most 16 GPUs")
    out_arr = np.zeros(1 << n, dtype=np.int32)
    cdef int32_t[::1] out = out_arr
    cdef uint64_t m, rest
    cdef int32_t low, j
    cdef int64_t add
    with nogil:
        for m in range(1, <uint64_t>1 << n):
            low = placer_ctz(m)
            rest = m & (m - 1)
            add = out[rest]
            while rest:
                j = placer_ctz(rest)
                rest &= rest - 1
                add += pair[low, j]
            out[m] = <int32_t>add
    return out_arr


def gpu_split_table(const int32_t[::1] score, int32_t n, int32_t k):
    """Best split value of every mask into sets of k GPUs plus one of |m| mod k."""
    if k < 1 or n > MAX_TABLE_GPUS or score.shape[0] != (1 << n):
        raise ValueError("bad split table arguments")
    out_arr = np.zeros(1 << n, dtype=np.int32)
    cdef int32_t[::1] split = out_arr
    cdef uint64_t m, low, block
    cdef int32_t r, size, pass_
    cdef int64_t val, best
    cdef Combos c
    with nogil:
        for m in range(1, <uint64_t>1 << n):
            r = placer_popcount(m) % k
            low = m & (~m + 1)
            best = -1
            for pass_ in range(2):
                # the block holding m's lowest GPU: k GPUs, or the r left over
                size = k if pass_ == 0 else r
                if size == 0 or (pass_ == 0 and placer_popcount(m) < k):
                    continue
                if not combos_start(&c, m ^ low, size - 1):
                    continue
                while True:
                    block = combos_mask(&c) | low
                    val = <int64_t>score[block] + split[m ^ block]
                    if val > best:
                        best = val
                    if not combos_next(&c):
                        break
            split[m] = <int32_t>best
    return out_arr


def gpu_choice_tables(const int32_t[::1] score, const int32_t[::1] split,
                      const int32_t[:, ::1] pair, int32_t k):
    """For every free mask, the chosen k-set under tiling and under best-set (uint16[2**n])."""
    cdef int32_t n = pair.shape[0]
    if k < 1 or k > n or n > MAX_TABLE_GPUS or score.shape[0] != (1 << n) or split.shape[0] != (1 << n):
        raise ValueError("bad choice table arguments")
    tiling_arr = np.zeros(1 << n, dtype=np.uint16)
    best_arr = np.zeros(1 << n, dtype=np.uint16)
    cdef uint16_t[::1] tiling = tiling_arr
    cdef uint16_t[::1] best_set = best_arr
    cdef uint64_t m
    with nogil:
        for m in range(1, <uint64_t>1 << n):
            if placer_popcount(m) < k:
                continue
            tiling[m] = <uint16_t>choose_in_mask(&score[0], &split[0], &pair[0, 0], n, k, m, 0,
                                                 OBJECTIVE_TILING)
            if k == 1:
                best_set[m] = tiling[m]
            else:
                best_set[m] = <uint16_t>choose_in_mask(&score[0], &split[0], &pair[0, 0], n, k, m, 0,
                                                       OBJECTIVE_BEST_SET)
    return tiling_arr, best_arr


def gpu_choose(const int32_t[::1] score, const int32_t[::1] split, const int32_t[:, ::1] pair,
               int32_t k, uint64_t free_mask, uint64_t required, int32_t objective):
    """The chosen k-set of ``free_mask`` that holds ``required`` (0: none exists)."""
    cdef int32_t n = pair.shape[0]
    if n > MAX_TABLE_GPUS or score.shape[0] != (1 << n) or split.shape[0] != (1 << n):
        raise ValueError("bad arguments")
    return choose_in_mask(&score[0], &split[0], &pair[0, 0], n, k, free_mask, required, objective)
