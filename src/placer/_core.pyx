# cython: language_level=3
"""Placement kernel: node state as arrays, bucket index, filters, policies, bind/release.

The arrays are owned by :class:`placer.cluster.Cluster` (numpy, dtypes from
``_typedefs.py``); :class:`Kernel` keeps raw pointers to them in a ``NodeState`` struct
so that the workers run ``nogil`` with no Python objects. Workers return status codes;
the ``def`` wrappers check shapes and raise.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t

import numpy as np

cimport numpy as cnp

cnp.import_array()

# Bumped whenever the arrays or entry points change; _typedefs.KERNEL_ABI must match.
KERNEL_ABI = 1

cdef extern from *:
    """
    static inline int placer_ctz(unsigned long long x) { return __builtin_ctzll(x); }
    static inline int placer_popcount(unsigned long long x) { return __builtin_popcountll(x); }
    """
    int placer_ctz(unsigned long long x) nogil
    int placer_popcount(unsigned long long x) nogil

cdef enum:
    POLICY_FIRST_FIT = 0
    POLICY_BEST_FIT = 1
    POLICY_SPREAD = 2
    POLICY_RANDOM = 3

cdef enum:
    R_CPU = 0
    R_MEM = 1
    R_PODS = 2
    R_GPU = 3
    R_GPU_MEM = 4
    N_REASONS = 5

cdef int64_t NO_COST = 1 << 62


cdef struct NodeState:
    int32_t n_nodes
    int32_t max_gpus
    int32_t n_words
    int32_t n_models
    uint64_t* free_mask
    uint8_t* free_count
    uint8_t* gpu_count
    int16_t* gpu_free_milli
    int32_t* gpu_free_mem
    int32_t* gpu_mem_cap
    int32_t* free_milli_sum
    int64_t* cpu_free
    int64_t* mem_free
    int32_t* pods_free
    uint8_t* cpu_tracked
    int32_t* model_id
    int32_t* model_max
    int32_t* bucket_base
    int32_t* bucket_of
    uint64_t* bucket_bits
    int64_t* bucket_cpu_floor


cdef struct Pod:
    int32_t gpus
    int32_t milli
    int32_t gpu_mem
    int64_t cpu
    int64_t mem
    uint64_t models
    const uint64_t* eligible


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


cdef inline uint64_t select_whole_gpus(uint64_t free_mask, int32_t k) noexcept nogil:
    """The k lowest-indexed GPUs of free_mask (issue #3 replaces this with topology tables)."""
    cdef uint64_t chosen = 0, rest = free_mask
    cdef int32_t i
    for i in range(k):
        chosen |= rest & (~rest + 1)
        rest &= rest - 1
    return chosen


cdef inline bint node_fits(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    if st.pods_free[n] < 1 or st.cpu_free[n] < p.cpu or st.mem_free[n] < p.mem:
        return False
    if p.gpus == 0:
        return True
    if is_shared(p):
        return shared_gpu(st, n, p, -1) >= 0
    return st.free_count[n] >= p.gpus and st.gpu_mem_cap[n] >= p.gpu_mem


cdef inline int64_t fit_cost(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    """The study's BestFit score turned into a cost: ceil((cpu_left + 16 gpu_left) / 2560)."""
    cdef int64_t cpu_left = 0
    cdef int64_t gpu_left = st.free_milli_sum[n] - <int64_t>p.gpus * p.milli
    if st.cpu_tracked[n]:
        cpu_left = st.cpu_free[n] - p.cpu
    return (cpu_left + 16 * gpu_left + 2559) // 2560


cdef inline uint64_t bucket_word(const NodeState* st, const Pod* p, int32_t f, int32_t w) noexcept nogil:
    """Word w of the union of buckets (model, f) over the pod's models."""
    cdef uint64_t word = 0
    cdef int32_t m
    for m in range(st.n_models):
        if (p.models >> m) & 1 and f <= st.model_max[m]:
            word |= st.bucket_bits[<int64_t>(st.bucket_base[m] + f) * st.n_words + w]
    return word


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
        word &= p.eligible[w] & only[w]
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


cdef int32_t choose_best_fit(const NodeState* st, const Pod* p, const uint64_t* only) noexcept nogil:
    cdef int32_t w, f, n, last_word, best = -1
    cdef int32_t fmin = min_free_count(p), fmax = max_model_count(st, p)
    cdef int64_t lower, cost, best_cost = NO_COST, need = <int64_t>p.gpus * p.milli
    cdef uint64_t word
    cdef bint done
    for f in range(fmin, fmax + 1):
        lower = 16 * (<int64_t>f * 1000 - need)
        if lower < 0:
            lower = 0
        if (lower + 2559) // 2560 > best_cost:
            break  # the GPU part alone only grows with f
        lower = (lower + cpu_left_floor(st, p, f) + 2559) // 2560
        if lower > best_cost:
            continue
        last_word = st.n_words - 1
        if lower == best_cost:
            last_word = best // 64  # only a lower index can still win a tie
        done = False
        for w in range(last_word + 1):
            word = bucket_word(st, p, f, w) & p.eligible[w] & only[w]
            while word:
                n = w * 64 + placer_ctz(word)
                word &= word - 1
                if not node_fits(st, n, p):
                    continue
                cost = fit_cost(st, n, p)
                if cost < best_cost or (cost == best_cost and n < best):
                    best_cost = cost
                    best = n
                if cost == lower:
                    done = True  # nothing later in this bucket can beat it
                    break
            if done:
                break
    return best


cdef int32_t choose_spread(const NodeState* st, const Pod* p, const uint64_t* only) noexcept nogil:
    cdef int32_t w, n, best = -1
    cdef int64_t cost, best_cost = -1
    cdef uint64_t word
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if node_fits(st, n, p):
                cost = fit_cost(st, n, p)
                if cost > best_cost:
                    best_cost = cost
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
    """Keep node n in the bucket of its free GPU count; lower the bucket's CPU floor.

    A floor only ever goes down (until the next rebuild), so it stays a valid lower bound.
    """
    cdef int32_t old = st.bucket_of[n]
    cdef int32_t new = st.bucket_base[st.model_id[n]] + st.free_count[n]
    cdef int32_t w = n // 64
    cdef uint64_t bit = (<uint64_t>1) << (n % 64)
    cdef int64_t cpu = st.cpu_free[n] if st.cpu_tracked[n] else 0
    if cpu < st.bucket_cpu_floor[new]:
        st.bucket_cpu_floor[new] = cpu
    if old == new:
        return
    st.bucket_bits[<int64_t>old * st.n_words + w] &= ~bit
    st.bucket_bits[<int64_t>new * st.n_words + w] |= bit
    st.bucket_of[n] = new


cdef void apply(NodeState* st, int32_t n, const Pod* p, uint64_t gpus, int32_t sign,
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


cdef void count_reasons(const NodeState* st, const Pod* p, const uint64_t* only, int32_t* out) noexcept nogil:
    """Per resource, how many statically eligible nodes fall short of the pod."""
    cdef int32_t w, n
    cdef uint64_t word
    for w in range(st.n_words):
        word = p.eligible[w] & only[w]
        while word:
            n = w * 64 + placer_ctz(word)
            word &= word - 1
            if st.cpu_free[n] < p.cpu:
                out[R_CPU] += 1
            if st.mem_free[n] < p.mem:
                out[R_MEM] += 1
            if st.pods_free[n] < 1:
                out[R_PODS] += 1
            if p.gpus == 0:
                continue
            if is_shared(p):
                if shared_gpu(st, n, p, -1) < 0:
                    if count_shared_milli(st, n, p):
                        out[R_GPU_MEM] += 1
                    else:
                        out[R_GPU] += 1
            elif st.free_count[n] < p.gpus:
                out[R_GPU] += 1
            elif st.gpu_mem_cap[n] < p.gpu_mem:
                out[R_GPU_MEM] += 1


cdef inline bint count_shared_milli(const NodeState* st, int32_t n, const Pod* p) noexcept nogil:
    """Whether some GPU has the pod's milli free (whatever its memory)."""
    cdef int32_t i
    cdef int64_t base = <int64_t>n * st.max_gpus
    for i in range(st.gpu_count[n]):
        if st.gpu_free_milli[base + i] >= p.milli:
            return True
    return False


cdef int32_t place_one(NodeState* st, const Pod* p, int32_t policy, const uint64_t* only,
                       uint64_t* rng, uint64_t* chosen) noexcept nogil:
    cdef int32_t n, gpu
    if policy == POLICY_FIRST_FIT:
        n = choose_first_fit(st, p, only)
    elif policy == POLICY_BEST_FIT:
        n = choose_best_fit(st, p, only)
    elif policy == POLICY_SPREAD:
        n = choose_spread(st, p, only)
    else:
        n = choose_random(st, p, only, rng)
    if n < 0:
        return -1
    if p.gpus == 0:
        chosen[0] = 0
    elif is_shared(p):
        if policy == POLICY_RANDOM:
            gpu = shared_gpu(st, n, p, <int32_t>(splitmix64(rng) % <uint64_t>count_shared_gpus(st, n, p)))
        else:
            gpu = shared_gpu(st, n, p, -1)
        chosen[0] = (<uint64_t>1) << gpu
    else:
        chosen[0] = select_whole_gpus(st.free_mask[n], p.gpus)
    apply(st, n, p, chosen[0], 1, 1, is_shared(p))
    return n


cdef class Kernel:
    """Node state of one cluster and the placement workers over it."""

    cdef NodeState st
    cdef object _arrays
    cdef object _all_nodes

    def __init__(self, dict arrays, int n_models):
        cdef int32_t n_nodes = arrays["free_mask"].shape[0]
        self._arrays = arrays
        self.st.n_nodes = n_nodes
        self.st.max_gpus = arrays["gpu_free_milli"].shape[1]
        self.st.n_words = arrays["bucket_bits"].shape[1]
        self.st.n_models = n_models
        self.st.free_mask = <uint64_t*>_ptr(arrays["free_mask"], np.uint64, n_nodes)
        self.st.free_count = <uint8_t*>_ptr(arrays["free_count"], np.uint8, n_nodes)
        self.st.gpu_count = <uint8_t*>_ptr(arrays["gpu_count"], np.uint8, n_nodes)
        self.st.gpu_free_milli = <int16_t*>_ptr(arrays["gpu_free_milli"], np.int16, n_nodes * self.st.max_gpus)
        self.st.gpu_free_mem = <int32_t*>_ptr(arrays["gpu_free_mem"], np.int32, n_nodes * self.st.max_gpus)
        self.st.gpu_mem_cap = <int32_t*>_ptr(arrays["gpu_mem_cap"], np.int32, n_nodes)
        self.st.free_milli_sum = <int32_t*>_ptr(arrays["free_milli_sum"], np.int32, n_nodes)
        self.st.cpu_free = <int64_t*>_ptr(arrays["cpu_free"], np.int64, n_nodes)
        self.st.mem_free = <int64_t*>_ptr(arrays["mem_free"], np.int64, n_nodes)
        self.st.pods_free = <int32_t*>_ptr(arrays["pods_free"], np.int32, n_nodes)
        self.st.cpu_tracked = <uint8_t*>_ptr(arrays["cpu_tracked"], np.uint8, n_nodes)
        self.st.model_id = <int32_t*>_ptr(arrays["model_id"], np.int32, n_nodes)
        self.st.model_max = <int32_t*>_ptr(arrays["model_max"], np.int32, n_models)
        self.st.bucket_base = <int32_t*>_ptr(arrays["bucket_base"], np.int32, n_models)
        self.st.bucket_of = <int32_t*>_ptr(arrays["bucket_of"], np.int32, n_nodes)
        self.st.bucket_cpu_floor = <int64_t*>_ptr(
            arrays["bucket_cpu_floor"], np.int64, arrays["bucket_bits"].shape[0])
        self.st.bucket_bits = <uint64_t*>_ptr(
            arrays["bucket_bits"], np.uint64, arrays["bucket_bits"].shape[0] * self.st.n_words)
        self._all_nodes = np.zeros(self.st.n_words, dtype=np.uint64)
        if n_nodes:
            self._all_nodes[:] = ~np.uint64(0)

    def place_batch(self, dict pods, int policy, cnp.ndarray rng, eligible, restrict=None,
                    bint reasons=True):
        """Place a batch of pods in order, binding each; groups are all or nothing.

        Parameters
        ----------
        pods : dict of arrays
            ``gpus``, ``milli``, ``gpu_mem`` (int32), ``cpu``, ``mem`` (int64), ``models``
            (uint64 mask of allowed model ids), ``klass`` (int32 row of ``eligible``) and
            ``group_end`` (int32; pods ``i .. group_end[i]-1`` are one all-or-nothing group
            when ``i`` starts a group).
        policy : int
            A code of ``_typedefs.POLICY_CODES``.
        rng : ndarray of uint64, shape (1,)
            SplitMix64 state, advanced in place.
        eligible : ndarray of uint64, shape (classes, words)
            Statically eligible nodes per class, as bitsets.
        restrict : ndarray of uint64, shape (words,), optional
            Only these nodes may be used.
        reasons : bool
            Count per-resource shortfalls for each pod that fails.

        Returns
        -------
        node : ndarray of int32
            Chosen node per pod, -1 when not placed.
        gpus : ndarray of uint64
            GPU mask per placed pod.
        failed_at : ndarray of int32
            For a pod of a failed group, the index of the pod that found no node; -1 else.
        reason_counts : ndarray of int32, shape (pods, 5)
            Resource shortfall counts (``_typedefs.RESOURCE_REASONS``) for the pod that failed.
        """
        cdef int32_t n_pods = pods["gpus"].shape[0]
        cdef const int32_t[::1] gpus = pods["gpus"]
        cdef const int32_t[::1] milli = pods["milli"]
        cdef const int32_t[::1] gpu_mem = pods["gpu_mem"]
        cdef const int64_t[::1] cpu = pods["cpu"]
        cdef const int64_t[::1] mem = pods["mem"]
        cdef const uint64_t[::1] models = pods["models"]
        cdef const int32_t[::1] klass = pods["klass"]
        cdef const int32_t[::1] group_end = pods["group_end"]
        cdef const uint64_t[:, ::1] elig = eligible
        cdef const uint64_t[::1] allowed = self._all_nodes if restrict is None else restrict
        cdef uint64_t[::1] rng_state = rng
        out_node_arr = np.full(n_pods, -1, dtype=np.int32)
        out_gpus_arr = np.zeros(n_pods, dtype=np.uint64)
        failed_arr = np.full(n_pods, -1, dtype=np.int32)
        counts_arr = np.zeros((n_pods, N_REASONS), dtype=np.int32)
        cdef int32_t[::1] out_node = out_node_arr
        cdef uint64_t[::1] out_gpus = out_gpus_arr
        cdef int32_t[::1] failed = failed_arr
        cdef int32_t[:, ::1] counts = counts_arr
        cdef int32_t i, j, end, n
        cdef Pod p
        if allowed.shape[0] != self.st.n_words or (n_pods and elig.shape[1] != self.st.n_words):
            raise ValueError("bitset width does not match the cluster")
        with nogil:
            i = 0
            while i < n_pods:
                end = group_end[i]
                for j in range(i, end):
                    load_pod(&p, j, gpus, milli, gpu_mem, cpu, mem, models, klass, elig)
                    n = place_one(&self.st, &p, policy, &allowed[0], &rng_state[0], &out_gpus[j])
                    out_node[j] = n
                    if n < 0:
                        if reasons:
                            count_reasons(&self.st, &p, &allowed[0], &counts[j, 0])
                        undo_group(&self.st, i, j, out_node, out_gpus, failed,
                                   gpus, milli, gpu_mem, cpu, mem, end)
                        break
                i = end
        return out_node_arr, out_gpus_arr, failed_arr, counts_arr

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


cdef inline void load_pod(Pod* p, int32_t j, const int32_t[::1] gpus, const int32_t[::1] milli,
                          const int32_t[::1] gpu_mem, const int64_t[::1] cpu, const int64_t[::1] mem,
                          const uint64_t[::1] models, const int32_t[::1] klass,
                          const uint64_t[:, ::1] elig) noexcept nogil:
    p.gpus = gpus[j]
    p.milli = milli[j]
    p.gpu_mem = gpu_mem[j]
    p.cpu = cpu[j]
    p.mem = mem[j]
    p.models = models[j]
    p.eligible = &elig[klass[j], 0]


cdef void undo_group(NodeState* st, int32_t start, int32_t failed_pod, int32_t[::1] out_node,
                     uint64_t[::1] out_gpus, int32_t[::1] failed, const int32_t[::1] gpus,
                     const int32_t[::1] milli, const int32_t[::1] gpu_mem, const int64_t[::1] cpu,
                     const int64_t[::1] mem, int32_t end) noexcept nogil:
    cdef int32_t k
    cdef Pod p
    for k in range(failed_pod - 1, start - 1, -1):
        p.gpus = gpus[k]
        p.milli = milli[k]
        p.gpu_mem = gpu_mem[k]
        p.cpu = cpu[k]
        p.mem = mem[k]
        apply(st, out_node[k], &p, out_gpus[k], -1, 1, is_shared(&p))
    for k in range(start, end):
        out_node[k] = -1
        out_gpus[k] = 0
        failed[k] = failed_pod


cdef void* _ptr(cnp.ndarray arr, dtype, Py_ssize_t size) except NULL:
    if arr.dtype != dtype or not arr.flags.c_contiguous or arr.size != size:
        raise ValueError(f"kernel array must be C-contiguous {np.dtype(dtype)} of size {size}")
    return cnp.PyArray_DATA(arr)
