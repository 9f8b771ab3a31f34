# cython: language_level=3
"""Declarations of the placement kernel: the C types shared by its workers.

``pack.py`` allocates every array with the dtypes that match these fields; change both
together and bump ``pack.KERNEL_ABI`` (compiled into ``_core`` by ``setup.py``).
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint64_t

# Policy codes (placer.policies.REGISTRY's ``code``; tests hold the two equal); cpdef: Python
# sees them as the IntEnum ``PolicyCode``
cpdef enum PolicyCode:
    POLICY_FIRST_FIT = 0
    POLICY_BEST_FIT = 1
    POLICY_SPREAD = 2
    POLICY_RANDOM = 3
    POLICY_FGD = 4
    POLICY_DOT_PRODUCT = 5
    POLICY_GPU_PACKING = 6
    POLICY_GPU_CLUSTERING = 7
    POLICY_FGD_PACK = 8

# Per-resource shortfall counters of a failed pod (pack.RESOURCE_REASONS order)
cdef enum:
    R_CPU = 0
    R_MEM = 1
    R_PODS = 2
    R_GPU = 3
    R_GPU_MEM = 4
    # then the inter-pod rules' counters (pack.RELATIONAL_REASONS order), kube's filter order
    R_SPREAD_LABEL = 5
    R_SPREAD = 6
    R_AFFINITY = 7
    R_ANTI = 8
    R_EXISTING_ANTI = 9
    N_REASONS = 10

# Kinds of an inter-pod constraint (placer.kernel.relations builds them)
cdef enum:
    REL_ZERO = 0       # passes where the node has no such label or its domain counts no pod
    REL_AFFINITY = 1   # passes where the node's domain counts some pod
    REL_SPREAD = 2     # passes where the domain's count + self - the minimum <= maxSkew

cdef enum:
    MAX_K = 16         # largest set size with tables (nodes of at most 16 GPUs)
    NIC_CLASSES = 5    # PIX, PXB, PHB, NODE, SYS: the NIC-to-GPU relations, best first

# GPU-set choice objectives (gpusets.OBJECTIVES order)
cdef enum:
    OBJECTIVE_TILING = 0
    OBJECTIVE_BEST_SET = 1

cdef struct NodeState:
    # The kernel's view of one cluster: pointers into the arrays of pack.PackedCluster (one row
    # per node unless said otherwise), updated in place by bind/release and the workers.
    int32_t n_nodes
    int32_t max_gpus                # GPUs of the largest node: the row width of the per-GPU arrays
    int32_t n_words                 # uint64 words of a node bitset (n_nodes / 64 rounded up, at least 1)
    int32_t n_models                # GPU model ids (0: no GPU); the length of the per-model arrays
    uint64_t* free_mask             # GPUs wholly free and healthy, bit g = GPU g
    uint8_t* free_count             # the bits of free_mask (saves a popcount in hot loops)
    uint8_t* gpu_count              # GPUs the node has
    int16_t* gpu_free_milli         # [node * max_gpus + gpu]: milli-GPU free (0..1000; 0: taken, MIG, unhealthy)
    int32_t* gpu_free_mem           # [node * max_gpus + gpu]: GPU memory free, MiB
    int32_t* gpu_mem_cap            # memory of one of the node's GPUs, MiB (untracked: pack.UNTRACKED_INT)
    int32_t* free_milli_sum         # sum of the node's gpu_free_milli
    int64_t* cpu_free               # CPU milli free (untracked: pack.UNTRACKED_BIG)
    int64_t* mem_free               # memory MiB free (untracked: pack.UNTRACKED_BIG)
    int32_t* pods_free              # pod slots free (untracked: pack.UNTRACKED_INT)
    uint8_t* cpu_tracked            # 1 when the node states its CPU (the CPU terms of the scores count it)
    int32_t* model_id               # GPU model id of the node
    int32_t* model_max              # per model id: the most GPUs one node of the model has
    int32_t* bucket_base            # per model id: its first bucket (buckets: one per (model, free GPU count))
    int32_t* bucket_of              # the bucket the node is in: bucket_base[model_id] + free_count
    uint64_t* bucket_bits           # [bucket * n_words + word]: bitset of the bucket's nodes
    int64_t* bucket_cpu_floor       # per bucket: a lower bound of its nodes' free CPU (only lowered)
    uint64_t* room_bits             # bitset of the nodes with some GPU milli free (a share looks only there)
    # GPU-set tables per node kind (a pair-score matrix and its NICs); kind -1: no topology
    int32_t* kind_of                # the node's kind, -1: none
    int32_t n_kinds
    int32_t* kind_gpus              # per kind: its GPUs (the tables are 1 << kind_gpus long)
    const int32_t** kind_pair       # [kind]: kind_gpus x kind_gpus pair scores
    const int32_t** kind_score      # [kind]: per GPU mask, the sum of its pair scores
    const int32_t** kind_split      # [kind * (MAX_K + 1) + k]
    const uint16_t** kind_choice    # [kind * (MAX_K + 1) + k], tiling objective
    int32_t* kind_nics              # per kind: its NICs
    const uint64_t** kind_nic_class  # [kind]: NIC-major, NIC_CLASSES GPU masks per NIC
    int32_t top_score[MAX_K + 1]     # best k-set score over all kinds
    # target workload of the fragmentation measure (FGD); n_types 0: not tracked
    int32_t n_types
    const int64_t* type_cpu         # per task type: CPU milli
    const int32_t* type_milli       # per-GPU milli; 0 for CPU-only types
    const int32_t* type_gpus        # per task type: GPUs
    const uint64_t* type_models     # allowed model ids as a bitmask
    const double* type_pop          # per task type: its popularity (share of the workload)
    double* node_frag               # F_n(M) per node, kept current by apply()
    int32_t* type_fit               # [node * n_types + type]: GPUs with the type's milli free
    int64_t* type_small             # [node * n_types + type]: free milli of the GPUs too small
    double frag_total               # their sum, kept current by apply()
    const int32_t* rank             # tie order of nodes for FGD (lower wins); NULL: index
    # fgd-pack (placer.workload.packing.PackingGuide); pack_regret NULL: not set
    double pack_cpu_per_gpu         # CPU milli per GPU of the CPU-stranding term
    double pack_pressure_weight     # weight of the pressure term
    double pack_regret_weight       # weight of the regret term
    const double* pack_regret       # [units of the pod * 101 + units free on the GPU]
    const double* pack_pressure     # per model id
    # scores of fgd and fgd-pack per (pod shape, node) within one place_batch; n_shapes 0: off
    int32_t* node_version           # bumped by every apply()
    int32_t n_shapes
    int32_t* cache_stamp            # [shape * n_nodes + node]: node_version + 1 when cached
    int32_t* cache_score            # [shape * n_nodes + node]: the score cached
    # gpu-clustering: pods per GPU tag per node ([node * n_tags + tag]; tag 0 share-gpu,
    # k k-gpu) and how many tags a node hosts, kept current by apply()
    int32_t n_tags                  # max_gpus + 1
    int32_t* tag_count
    int32_t* tag_kinds


cdef struct Pod:
    int32_t gpus
    int32_t milli
    int32_t gpu_mem
    int64_t cpu
    int64_t mem
    uint64_t models
    int32_t nics
    int32_t shape                   # index of the pod's shape in the score cache; -1: none
    const uint64_t* eligible


cdef struct RelView:
    # The inter-pod rules of one batch (placer.kernel.relations.Relations): constraints whose
    # counts per topology domain change as pods are placed, and which constraints each pod
    # must pass and adds to. Domains are numbered per topology key.
    int32_t n_cons
    int32_t n_nodes
    int32_t n_words
    int32_t n_pods
    const int32_t* dom_of           # [key * n_nodes + node]: the node's domain of the key, -1: no label
    const int32_t* dom_node_start   # [key_dom_base[key] + domain]: first entry in dom_nodes (one more at the end)
    const int32_t* dom_nodes        # the nodes of each domain
    const int32_t* key_dom_base     # per key: its first domain among all keys' (key count + 1 entries)
    const uint64_t* has_key         # [key * n_words + word]: nodes with the key's label
    const int32_t* con_key          # per constraint: its topology key
    const int32_t* con_kind         # REL_ZERO, REL_AFFINITY, REL_SPREAD
    const int32_t* con_reason       # its R_* counter
    const int32_t* con_off          # offset of its domains in count and in_map
    const int32_t* con_group        # affinity: the group of the terms of one pod (-1: none)
    const int32_t* con_max_skew
    const int32_t* con_min_domains
    const int32_t* con_self         # spread: 1 when its pods match their own selector
    const uint64_t* con_counted     # [c * n_words + word]: nodes whose pods count
    const uint8_t* in_map           # spread: the domain has a counted node (kube's TpValueToMatchNum key)
    int32_t* count                  # [con_off[c] + domain]: pods counted
    uint64_t* con_pass              # [c * n_words + word]: nodes that pass now
    int32_t* con_min                # spread: the minimum count over its domains in the map
    int32_t* con_domains            # spread: domains in the map
    int64_t* group_total            # per group: pods counted by its terms, over all domains
    const int32_t* need_start       # [pod]: first entry in need_con (one more at the end)
    const int32_t* need_con         # constraints the pod must pass, in kube's filter order
    const uint8_t* need_self        # affinity: the pod matches its own terms (kube's first-pod rule)
    const int32_t* add_start        # [pod]: first entry in add_con
    const int32_t* add_con          # constraints whose counts the pod adds to when placed
    uint64_t* scratch               # one node bitset: a pod's eligible nodes under its rules


cdef class Relations:
    cdef RelView view
    cdef readonly dict arrays


cdef class Kernel:
    cdef NodeState st
    cdef object _arrays
    cdef object _all_nodes
    cdef list _tables
    cdef object _workload
    cdef object _rank
    cdef object _packing
    cdef object _node_version

    cdef void _place_all(self, const BatchView* b, int policy, const uint64_t[::1] allowed,
                         uint64_t[::1] rng_state, int32_t[::1] out_node, uint64_t[::1] out_gpus,
                         uint64_t[::1] out_nics, int32_t[::1] failed, int32_t[:, ::1] counts, bint reasons,
                         double* trace, const int32_t[::1] shape_of, RelView* rel, int32_t rel_from) noexcept


cdef struct BatchView:
    # the columns of a PodBatch, one value per pod
    int32_t size
    int32_t n_words                 # words of a node bitset
    const int32_t* gpus
    const int32_t* milli
    const int32_t* gpu_mem
    const int64_t* cpu
    const int64_t* mem
    const int32_t* nics
    const uint64_t* models          # allowed GPU model ids, a bitmask
    const int32_t* klass            # row of ``eligible``
    const int32_t* group_end        # pods i .. group_end[i]-1 form one all-or-nothing group
    const uint64_t* eligible        # [class * n_words + word]: statically eligible nodes


cdef class PodBatch:
    cdef readonly int32_t size
    cdef readonly tuple arrays
    cdef BatchView view
