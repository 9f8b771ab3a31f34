# cython: language_level=3
"""Model objects to the kernel's columns and its placements back, one pass each.

The kernel's arrays are built from a snapshot's nodes and a request's pods. Read field by
field with ``map(attrgetter(...))``, that is a dozen passes over the same objects; these
loops read every field they need from each object once. They only read: what the values
mean (dtypes, scatters, errors) stays in ``placer.kernel.pack``. On the way back, a run's
placements become :class:`placer.model.Assignment` records and holdings in one pass.
"""
import numpy as np

cimport numpy as cnp
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from placer._slots cimport field, is_none, slot_offset, truthy
from placer.model import EMPTY, Assignment, Node, PodRequest, RunningPod
from placer.model.roles import defaults, eligibility_fields

cnp.import_array()

cdef PyTypeObject* REQUEST = <PyTypeObject*>PodRequest
cdef PyTypeObject* NODE = <PyTypeObject*>Node
cdef PyTypeObject* POD = <PyTypeObject*>RunningPod
cdef PyObject* NO_ENTRIES = <PyObject*>EMPTY  # the default of every mapping field: empty

cdef Py_ssize_t Q_GPUS = slot_offset(PodRequest, "gpus")
cdef Py_ssize_t Q_GPU_MILLI = slot_offset(PodRequest, "gpu_milli")
cdef Py_ssize_t Q_GPU_MEM = slot_offset(PodRequest, "gpu_memory_mib")
cdef Py_ssize_t Q_NICS = slot_offset(PodRequest, "nics")
cdef Py_ssize_t Q_CPU = slot_offset(PodRequest, "cpu_milli")
cdef Py_ssize_t Q_MEM = slot_offset(PodRequest, "memory_mib")
cdef Py_ssize_t Q_RESOURCES = slot_offset(PodRequest, "resources")
cdef Py_ssize_t Q_NAME = slot_offset(PodRequest, "name")
cdef Py_ssize_t Q_GANG = slot_offset(PodRequest, "gang")
cdef Py_ssize_t Q_SLOTS = slot_offset(PodRequest, "gpu_slots")
cdef Py_ssize_t Q_PRIORITY = slot_offset(PodRequest, "priority")
cdef Py_ssize_t Q_MIG = slot_offset(PodRequest, "mig")
# the fields the static eligibility of a pod reads: a pod that sets none of them is plain
_STATIC = eligibility_fields(PodRequest)
if len(_STATIC) > 64 or any(defaults(PodRequest)[name] for name in _STATIC):
    raise TypeError(f"PodRequest: a field of the static roles needs a falsy default ({', '.join(_STATIC)})")
_FILTERS = tuple(name for name in _STATIC if name not in ("nics", "resources"))  # those two are read anyway
cdef Py_ssize_t Q_FILTER_COUNT = len(_FILTERS)
cdef Py_ssize_t Q_FILTER[64]
cdef PyObject* Q_FILTER_NAME[64]  # borrowed from _FILTERS
cdef void _filter_slots():
    cdef Py_ssize_t k
    for k in range(Q_FILTER_COUNT):
        Q_FILTER[k] = slot_offset(PodRequest, _FILTERS[k])
        Q_FILTER_NAME[k] = <PyObject*>_FILTERS[k]
_filter_slots()
cdef Py_ssize_t N_NAME = slot_offset(Node, "name")
cdef Py_ssize_t N_HARDWARE = slot_offset(Node, "hardware")
cdef Py_ssize_t N_UNSCHEDULABLE = slot_offset(Node, "unschedulable")
cdef Py_ssize_t N_RESOURCES = slot_offset(Node, "resources")
cdef Py_ssize_t N_UNHEALTHY = slot_offset(Node, "unhealthy_gpus")
cdef Py_ssize_t N_TAINTS = slot_offset(Node, "taints")
cdef Py_ssize_t N_PODS = slot_offset(Node, "pods")
cdef Py_ssize_t R_NAME = slot_offset(RunningPod, "name")
cdef Py_ssize_t R_GPUS = slot_offset(RunningPod, "gpus")
cdef Py_ssize_t R_CPU = slot_offset(RunningPod, "cpu_milli")
cdef Py_ssize_t R_MEM = slot_offset(RunningPod, "memory_mib")
cdef Py_ssize_t R_SHARES = slot_offset(RunningPod, "gpu_shares")
cdef Py_ssize_t R_GPU_MEM = slot_offset(RunningPod, "gpu_memory_mib")
cdef Py_ssize_t R_SLOTS = slot_offset(RunningPod, "gpu_slots")
cdef Py_ssize_t R_RESOURCES = slot_offset(RunningPod, "resources")


def pod_columns(pods):
    """The kernel's per-pod columns of ``pods`` (PodRequest), one pass.

    Returns
    -------
    counts : ndarray of int32, shape (4, n)
        Rows ``gpus``, ``gpu_milli``, ``gpu_memory_mib``, ``nics``.
    quantities : ndarray of int64, shape (2, n)
        Rows ``cpu_milli``, ``memory_mib``.
    plain : ndarray of uint8, shape (n,)
        1 where the pod sets no field of the static roles
        (:func:`placer.model.roles.eligibility_fields`: selector, tolerations, GPU models,
        NICs, extended resources, GPU slots): whole GPUs, a share, or none.
    with_resources : list of int
        Positions of the pods that ask for extended resources.

    Raises
    ------
    OverflowError
        A value beyond its column's type.
    """
    cdef list items = list(pods)
    cdef Py_ssize_t n = len(items), i
    cdef cnp.ndarray counts_array = np.empty((4, n), dtype=np.int32)
    cdef cnp.ndarray quantities_array = np.empty((2, n), dtype=np.int64)
    cdef cnp.ndarray plain_array = np.empty(n, dtype=np.uint8)
    cdef int32_t[:, ::1] counts = counts_array
    cdef int64_t[:, ::1] quantities = quantities_array
    cdef uint8_t[::1] plain = plain_array
    cdef list with_resources = []
    cdef object pod, nics
    cdef bint resources, filtered
    cdef Py_ssize_t k
    for i in range(n):
        pod = items[i]
        nics = field(pod, REQUEST, Q_NICS, "nics")
        resources = truthy(pod, REQUEST, Q_RESOURCES, "resources", NO_ENTRIES)
        counts[0, i] = field(pod, REQUEST, Q_GPUS, "gpus")
        counts[1, i] = field(pod, REQUEST, Q_GPU_MILLI, "gpu_milli")
        counts[2, i] = field(pod, REQUEST, Q_GPU_MEM, "gpu_memory_mib")
        counts[3, i] = nics
        quantities[0, i] = field(pod, REQUEST, Q_CPU, "cpu_milli")
        quantities[1, i] = field(pod, REQUEST, Q_MEM, "memory_mib")
        if resources:
            with_resources.append(i)
        filtered = resources or nics
        if not filtered:
            for k in range(Q_FILTER_COUNT):
                if truthy(pod, REQUEST, Q_FILTER[k], <object>Q_FILTER_NAME[k], NO_ENTRIES):
                    filtered = True
                    break
        plain[i] = not filtered
    return counts_array, quantities_array, plain_array, with_resources


def node_columns(nodes):
    """What the packing needs of each node and each running pod, one pass.

    Returns
    -------
    dict
        ``names`` (per node), ``hardware`` (the distinct hardware objects, in the order
        of their first node), ``hardware_of`` (intp per node: its index in ``hardware``,
        -1 for none), ``first_node`` (per distinct hardware, its first node),
        ``no_hardware`` (the first node without hardware, -1 for none),
        ``unschedulable`` (uint8 per node), ``holdings`` (pod name -> (node, running
        pod), the last pod of a name kept),
        ``running`` (the running pods, node by node), ``running_node`` (intp per running
        pod), ``cpu_milli``, ``memory_mib`` (int64 sums per node), ``pod_count`` (intp per
        node), ``held`` (intp per running pod: GPUs listed), ``gpus`` (intp, the listed
        GPUs of all running pods in order), ``special`` (positions in ``running`` of pods
        with GPU shares, GPU memory or GPU slots), ``pod_resources`` (positions of pods
        with extended resources), ``node_resources``, ``unhealthy`` and ``tainted``
        (nodes with extended resources, with unhealthy GPUs, with taints).
    """
    cdef list items = list(nodes)
    cdef Py_ssize_t n = len(items), i, k, m, total = 0, held_total = 0
    cdef list names = [None] * n
    cdef list hardware = []
    cdef list first_node = []
    cdef dict hardware_index = {}  # id of a hardware object -> its index in hardware
    cdef Py_ssize_t no_hardware = -1, last_index = -1
    cdef object hw, last_hw = None
    cdef cnp.ndarray hardware_of_array = np.empty(n, dtype=np.intp)
    cdef Py_ssize_t[::1] hardware_of = hardware_of_array
    cdef list running = []
    cdef dict holdings = {}
    cdef list special = []
    cdef list pod_resources = []
    cdef list node_resources = []
    cdef list unhealthy = []
    cdef list tainted = []
    cdef list pod_lists = [None] * n
    cdef list gpu_lists = []
    cdef cnp.ndarray unschedulable_array = np.empty(n, dtype=np.uint8)
    cdef cnp.ndarray cpu_array = np.zeros(n, dtype=np.int64)
    cdef cnp.ndarray mem_array = np.zeros(n, dtype=np.int64)
    cdef cnp.ndarray count_array = np.empty(n, dtype=np.intp)
    cdef uint8_t[::1] unschedulable = unschedulable_array
    cdef int64_t[::1] cpu = cpu_array
    cdef int64_t[::1] mem = mem_array
    cdef Py_ssize_t[::1] pod_count = count_array
    cdef object node, node_pods, pod, gpus
    cdef int64_t cpu_sum, mem_sum
    for i in range(n):
        node = items[i]
        names[i] = field(node, NODE, N_NAME, "name")
        hw = field(node, NODE, N_HARDWARE, "hardware")
        if hw is None:
            hardware_of[i] = -1
            if no_hardware < 0:
                no_hardware = i
        elif hw is last_hw:  # nodes of one type share its hardware object
            hardware_of[i] = last_index
        else:
            found = hardware_index.get(id(hw))
            if found is None:
                found = hardware_index[id(hw)] = len(hardware)
                hardware.append(hw)
                first_node.append(i)
            last_hw = hw
            last_index = found
            hardware_of[i] = last_index
        unschedulable[i] = truthy(node, NODE, N_UNSCHEDULABLE, "unschedulable", NO_ENTRIES)
        if truthy(node, NODE, N_RESOURCES, "resources", NO_ENTRIES):
            node_resources.append(i)
        if truthy(node, NODE, N_UNHEALTHY, "unhealthy_gpus", NO_ENTRIES):
            unhealthy.append(i)
        if truthy(node, NODE, N_TAINTS, "taints", NO_ENTRIES):
            tainted.append(i)
        node_pods = field(node, NODE, N_PODS, "pods")
        pod_lists[i] = node_pods
        m = len(node_pods)
        pod_count[i] = m
        total += m
    cdef cnp.ndarray at_array = np.empty(total, dtype=np.intp)
    cdef cnp.ndarray held_array = np.empty(total, dtype=np.intp)
    cdef Py_ssize_t[::1] at = at_array
    cdef Py_ssize_t[::1] held = held_array
    k = 0
    for i in range(n):
        node_pods = pod_lists[i]
        cpu_sum = 0
        mem_sum = 0
        for pod in node_pods:
            running.append(pod)
            holdings[field(pod, POD, R_NAME, "name")] = (i, pod)
            at[k] = i
            cpu_sum += <int64_t>field(pod, POD, R_CPU, "cpu_milli")
            mem_sum += <int64_t>field(pod, POD, R_MEM, "memory_mib")
            gpus = field(pod, POD, R_GPUS, "gpus")
            m = len(gpus)
            held[k] = m
            if m:
                gpu_lists.append(gpus)
                held_total += m
            if (truthy(pod, POD, R_SHARES, "gpu_shares", NO_ENTRIES)
                    or truthy(pod, POD, R_GPU_MEM, "gpu_memory_mib", NO_ENTRIES)
                    or truthy(pod, POD, R_SLOTS, "gpu_slots", NO_ENTRIES)):
                special.append(k)
            if truthy(pod, POD, R_RESOURCES, "resources", NO_ENTRIES):
                pod_resources.append(k)
            k += 1
        cpu[i] = cpu_sum
        mem[i] = mem_sum
    cdef cnp.ndarray gpus_array = np.empty(held_total, dtype=np.intp)
    cdef Py_ssize_t[::1] flat = gpus_array
    k = 0
    for gpus in gpu_lists:
        for m in gpus:
            flat[k] = m
            k += 1
    return {
        "names": names,
        "hardware": hardware,
        "hardware_of": hardware_of_array,
        "first_node": first_node,
        "no_hardware": no_hardware,
        "unschedulable": unschedulable_array,
        "running": running,
        "holdings": holdings,
        "running_node": at_array,
        "cpu_milli": cpu_array,
        "memory_mib": mem_array,
        "pod_count": count_array,
        "held": held_array,
        "gpus": gpus_array,
        "special": special,
        "pod_resources": pod_resources,
        "node_resources": node_resources,
        "unhealthy": unhealthy,
        "tainted": tainted,
    }


cdef dict _INDICES = {}  # GPU mask -> its indices (shared tuples: most masks recur)


cpdef tuple mask_to_indices(object mask):
    """GPU indices of a bitmask, ascending."""
    cdef object found = _INDICES.get(mask)
    cdef uint64_t bits
    cdef int i
    if found is None:
        bits = mask
        found = tuple([i for i in range(64) if (bits >> i) & 1])
        if len(_INDICES) < 1 << 16:
            _INDICES[mask] = found
    return <tuple>found


cpdef object assignment(object pod, str node, object mask):
    """The Assignment of a pod of whole GPUs, a share of one GPU, or none, on ``node``: its
    GPUs are the bits of ``mask``; ``gpu_milli`` is set for a share."""
    cdef object milli = field(pod, REQUEST, Q_GPU_MILLI, "gpu_milli")
    cdef object share = None
    if field(pod, REQUEST, Q_GPUS, "gpus") == 1 and milli < 1000:
        share = milli
    return Assignment(field(pod, REQUEST, Q_NAME, "name"), node, mask_to_indices(mask), share,
                      field(pod, REQUEST, Q_GANG, "gang"))


def run_assignments(list pods, list nodes, list masks, list node_names):
    """The placed pods of a run without NICs, and their assignments, in order (its pods
    hold no MIG instances or GPU slots: those are placed one by one, never in runs).

    Returns
    -------
    placed : list of (PodRequest, int, int)
        Each placed pod, its node and its GPU mask.
    assignments : list of Assignment
    failed : list of int
        The positions of the pods that were not placed (their node is negative).
    """
    cdef Py_ssize_t i, n = len(pods)
    cdef list placed = []
    cdef list made = []
    cdef list failed = []
    cdef object pod, node, mask
    for i in range(n):
        node = nodes[i]
        if node < 0:
            failed.append(i)
            continue
        pod = pods[i]
        mask = masks[i]
        placed.append((pod, node, mask))
        made.append(assignment(pod, node_names[node], mask))
    return placed, made, failed


def hold_placed(dict held, list placed):
    """Record each placed (pod, node, GPU mask) in ``held``: pod name -> (node, (pod, mask))."""
    cdef object pod, node, mask
    for pod, node, mask in placed:
        held[field(pod, REQUEST, Q_NAME, "name")] = (node, (pod, mask))


def first_held(dict held, pods):
    """The position of the first of ``pods`` whose name is a key of ``held``, -1 for none."""
    cdef Py_ssize_t i = 0
    cdef object pod
    for pod in pods:
        if field(pod, REQUEST, Q_NAME, "name") in held:
            return i
        i += 1
    return -1


def any_prioritized(pods):
    """Whether some of ``pods`` has a priority other than 0."""
    cdef object pod
    for pod in pods:
        if truthy(pod, REQUEST, Q_PRIORITY, "priority", NO_ENTRIES):
            return True
    return False


def any_placed_apart(pods):
    """Whether some of ``pods`` asks for extended resources, a MIG instance or GPU slots
    (each such pod is a step of its own)."""
    cdef object pod
    for pod in pods:
        if (truthy(pod, REQUEST, Q_RESOURCES, "resources", NO_ENTRIES) or not is_none(pod, REQUEST, Q_MIG, "mig")
                or truthy(pod, REQUEST, Q_SLOTS, "gpu_slots", NO_ENTRIES)):
            return True
    return False
