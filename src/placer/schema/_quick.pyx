# cython: language_level=3
"""The quick paths of the schema, compiled: a snapshot's common nodes, a request's common pods.

:func:`finish_nodes` (:mod:`placer.schema.snapshot`): a node of a known type of whole GPUs, with nothing inline and pods that hold whole GPUs
only (each in range, held once, within the node's CPU, memory and pod capacity), gets its
type's hardware here; every other node goes to the exact checks. Names are collected and
scanned for control characters in the same pass. Whatever is wrong makes the caller run the
exact checks from the start, which say where: this pass only says whether.

:func:`common_pods` (:mod:`placer.schema.request`): the pods of a request whose every entry
is one plain pod; anything else, or any fault, leaves the request to the general path.
:func:`dict_pods` builds the same from the entries as written (dicts), before anything is
decoded; :func:`dict_nodes` builds a snapshot's plain nodes from its dicts the same way
(their rules are then checked as for decoded nodes).

The field lists are derived from the roles of the fields (:mod:`placer.model.roles`) and
the pods are built from a template by named slots, so a field added to a Struct is either
read here or sends its object to the general path: it is never dropped.
"""
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint64_t

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object text)
    void* PyUnicode_DATA(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(object text)

import msgspec
from msgspec.structs import force_setattr

from placer._slots cimport field, is_none, set_slot, slot_offset, truthy
from placer.model import EMPTY, InlineHardware, Node, PodRequest, RunningPod
from placer.model.roles import Role, fields_with
from placer.schema.documents import PodDoc

cdef enum:
    MAX_FIELDS = 64  # fields a quick reader handles per object, at most

cdef int64_t OVER = 1LL << 62  # above every capacity: a sum past it fits nowhere
cdef PyTypeObject* NODE = <PyTypeObject*>Node
cdef PyTypeObject* POD = <PyTypeObject*>RunningPod
cdef PyTypeObject* DOC = <PyTypeObject*>PodDoc
cdef PyObject* NO_ENTRIES = <PyObject*>EMPTY  # the default of every mapping field: empty

cdef void _fields(object cls, tuple names, Py_ssize_t* offsets, PyObject** name_of) except *:
    """Fill the slot offsets of ``names`` in ``cls`` and the names themselves (borrowed from
    ``names``, a module constant)."""
    cdef Py_ssize_t k
    if len(names) > MAX_FIELDS:
        raise ValueError(f"{cls.__name__}: more than {MAX_FIELDS} fields to read")
    for k in range(len(names)):
        offsets[k] = slot_offset(cls, names[k])
        name_of[k] = <PyObject*>names[k]


# the hardware a node may give inline (its effective hardware, every field of InlineHardware):
# the quick pass takes nodes that give none
_INLINE = ("hardware", *[f.name for f in msgspec.structs.fields(InlineHardware)])
cdef Py_ssize_t N_INLINE_COUNT = len(_INLINE)
cdef Py_ssize_t N_INLINE[MAX_FIELDS]
cdef PyObject* N_INLINE_NAME[MAX_FIELDS]
_fields(Node, _INLINE, N_INLINE, N_INLINE_NAME)
# what a node holds or offers besides its hardware and its pods (unhealthy GPUs, MIG
# instances, extended resources): the quick pass takes nodes where each is empty
_HOLDS = tuple(name for name in fields_with(Node, Role.RESOURCE, Role.GATED) if name not in _INLINE and name != "pods")
cdef Py_ssize_t N_HOLDS_COUNT = len(_HOLDS)
cdef Py_ssize_t N_HOLDS[MAX_FIELDS]
cdef PyObject* N_HOLDS_NAME[MAX_FIELDS]
_fields(Node, _HOLDS, N_HOLDS, N_HOLDS_NAME)
cdef Py_ssize_t N_NAME = slot_offset(Node, "name")
cdef Py_ssize_t N_HARDWARE = slot_offset(Node, "hardware")
cdef Py_ssize_t N_TYPE = slot_offset(Node, "type")
cdef Py_ssize_t N_TOPOLOGY = slot_offset(Node, "topology")
cdef Py_ssize_t N_LABELS = slot_offset(Node, "labels")
cdef Py_ssize_t N_TAINTS = slot_offset(Node, "taints")
cdef Py_ssize_t N_PODS = slot_offset(Node, "pods")
cdef Py_ssize_t P_NAME = slot_offset(RunningPod, "name")
cdef Py_ssize_t P_GPUS = slot_offset(RunningPod, "gpus")  # the summed fields, as SUMMED_POD_FIELDS orders them
cdef Py_ssize_t P_CPU = slot_offset(RunningPod, "cpu_milli")
cdef Py_ssize_t P_MEM = slot_offset(RunningPod, "memory_mib")
cdef Py_ssize_t P_LABELS = slot_offset(RunningPod, "labels")
cdef Py_ssize_t P_GANG = slot_offset(RunningPod, "gang")
cdef Py_ssize_t P_START = slot_offset(RunningPod, "start_time")
# what makes a pod other than one of whole GPUs, CPU and memory (the pass sums these): every
# other field of the resource roles must be empty, and so must the relational ones (an
# affinity takes the exact checks, which validate it)
SUMMED_POD_FIELDS = ("gpus", "cpu_milli", "memory_mib")  # also what dict_nodes reads of a pod, after its name
_SPECIAL = tuple(
    name for name in fields_with(RunningPod, Role.RESOURCE, Role.GATED, Role.RELATIONAL) if name not in SUMMED_POD_FIELDS
)
cdef Py_ssize_t P_SPECIAL_COUNT = len(_SPECIAL)
cdef Py_ssize_t P_SPECIAL[MAX_FIELDS]
cdef PyObject* P_SPECIAL_NAME[MAX_FIELDS]
_fields(RunningPod, _SPECIAL, P_SPECIAL, P_SPECIAL_NAME)

cdef Py_ssize_t D_NAME = slot_offset(PodDoc, "name")
cdef Py_ssize_t D_GPUS = slot_offset(PodDoc, "gpus")
cdef Py_ssize_t D_GPU_MILLI = slot_offset(PodDoc, "gpu_milli")


cdef inline bint _control(str text):
    """Whether ``text`` holds a control character (U+0000-U+001F, U+007F)."""
    cdef Py_UCS4 c
    cdef const unsigned char* ascii
    cdef Py_ssize_t k
    if PyUnicode_IS_COMPACT_ASCII(text):  # names almost always are: a byte loop
        ascii = <const unsigned char*>PyUnicode_DATA(text)
        for k in range(PyUnicode_GET_LENGTH(text)):
            if ascii[k] < 0x20 or ascii[k] == 0x7F:
                return True
        return False
    for c in text:
        if c < 0x20 or c == 0x7F:
            return True
    return False


cdef bint _any_control(texts):
    cdef object text
    for text in texts:
        if _control(text):
            return True
    return False


cdef bint _pod_plain(object pod):
    """Whether a pod holds nothing but whole GPUs, CPU and memory."""
    cdef Py_ssize_t k
    for k in range(P_SPECIAL_COUNT):
        if truthy(pod, POD, P_SPECIAL[k], <object>P_SPECIAL_NAME[k], NO_ENTRIES):
            return False
    return type(field(pod, POD, P_START, "start_time")) is not str


cdef bint _pods_plain(tuple pods, Py_ssize_t ngpus, int64_t cpu_cap, int64_t mem_cap, int64_t pod_cap):
    """Whether a node's pods hold whole GPUs only, each in range and once, within capacity."""
    cdef uint64_t taken = 0, bit
    cdef int64_t cpu = 0, mem = 0, x
    cdef object pod, gpu
    if <int64_t>len(pods) > pod_cap:
        return False
    for pod in pods:
        if not _pod_plain(pod):
            return False
        for gpu in <tuple>field(pod, POD, P_GPUS, "gpus"):
            x = gpu
            if x < 0 or x >= ngpus or ngpus > 64:
                return False
            bit = (<uint64_t>1) << x
            if taken & bit:
                return False
            taken |= bit
        cpu += <int64_t>field(pod, POD, P_CPU, "cpu_milli")
        mem += <int64_t>field(pod, POD, P_MEM, "memory_mib")
        if cpu > cpu_cap or mem > mem_cap or cpu > OVER or mem > OVER:
            return False
    return True


cdef bint _node_plain(object node, object level_set):
    """Whether a node gives no hardware inline, holds nothing but its pods (no unhealthy GPUs,
    MIG instances or extended resources), and has only known topology levels."""
    cdef Py_ssize_t k
    for k in range(N_INLINE_COUNT):
        if not is_none(node, NODE, N_INLINE[k], <object>N_INLINE_NAME[k]):
            return False
    for k in range(N_HOLDS_COUNT):
        if truthy(node, NODE, N_HOLDS[k], <object>N_HOLDS_NAME[k], NO_ENTRIES):
            return False
    return (not truthy(node, NODE, N_TOPOLOGY, "topology", NO_ENTRIES)
            or level_set.issuperset(field(node, NODE, N_TOPOLOGY, "topology")))


cdef bint _pod_texts_control(tuple pods):
    cdef object pod, labels, gang
    for pod in pods:
        if _control(field(pod, POD, P_NAME, "name")):
            return True
        if truthy(pod, POD, P_LABELS, "labels", NO_ENTRIES):
            labels = field(pod, POD, P_LABELS, "labels")
            if _any_control(labels.keys()) or _any_control(labels.values()):
                return True
        gang = field(pod, POD, P_GANG, "gang")
        if gang is not None and _control(gang):
            return True
    return False


cdef bint _node_texts_control(object node):
    cdef object labels, taint
    if _control(field(node, NODE, N_NAME, "name")):
        return True
    if truthy(node, NODE, N_TOPOLOGY, "topology", NO_ENTRIES) and _any_control(
            field(node, NODE, N_TOPOLOGY, "topology").values()):
        return True
    if truthy(node, NODE, N_LABELS, "labels", NO_ENTRIES):
        labels = field(node, NODE, N_LABELS, "labels")
        if _any_control(labels.keys()) or _any_control(labels.values()):
            return True
    for taint in field(node, NODE, N_TAINTS, "taints"):
        if _control(taint.key) or _control(taint.value):
            return True
    return False


def finish_nodes(list nodes, dict plain, tuple empty, level_set, exact_node, bint check_names, list at):
    """Finish every node: the common ones here, the others by ``exact_node(node, i)``.

    Parameters
    ----------
    nodes : list of Node
    plain : dict
        Node type name -> (hardware, GPUs, CPU cap, memory cap, pod cap) for the types of
        whole GPUs (no MIG, no sharing); a cap not given is above every sum.
    empty : tuple
        The same for a node without a type.
    level_set : frozenset
        The snapshot's topology levels.
    exact_node : callable
        The exact checks of one node; raises at its first fault.
    check_names : bool
        Scan names for control characters.
    at : list
        ``at[0]`` is set to the index of the node being finished when anything raises.

    Returns
    -------
    bool
        Whether every node and pod name is unique and, when scanned, free of control
        characters.
    """
    cdef Py_ssize_t i = 0, n = len(nodes), pod_count = 0
    cdef set pod_names = set()
    cdef set node_names = set()
    cdef bint clean = True
    cdef object node, info, kind, pod
    cdef tuple pods
    try:
        for i in range(n):
            node = nodes[i]
            kind = field(node, NODE, N_TYPE, "type")
            info = empty if kind is None else plain.get(kind)
            pods = field(node, NODE, N_PODS, "pods")
            if (
                info is not None
                and _node_plain(node, level_set)
                and _pods_plain(pods, (<tuple>info)[1], (<tuple>info)[2], (<tuple>info)[3], (<tuple>info)[4])
            ):
                if (<PyObject*>node).ob_type == NODE and N_HARDWARE >= 0:
                    set_slot(node, N_HARDWARE, (<tuple>info)[0])
                else:
                    force_setattr(node, "hardware", (<tuple>info)[0])
            else:
                exact_node(node, i)
            node_names.add(field(node, NODE, N_NAME, "name"))
            for pod in pods:
                pod_names.add(field(pod, POD, P_NAME, "name"))
            pod_count += len(pods)
            if check_names and clean and (_node_texts_control(node) or _pod_texts_control(pods)):
                clean = False
    except BaseException:
        at[0] = i
        raise
    return clean and len(pod_names) == pod_count and len(node_names) == n


cdef extern from "Python.h":
    bint PyDict_Next(object d, Py_ssize_t* pos, PyObject** key, PyObject** value)
    long long PyLong_AsLongLongAndOverflow(object number, int* overflow) except? -1


cdef extern from *:
    """
    /* Call a builtin method of no arguments (a Struct's __copy__) through its C function. */
    static inline PyObject *placer_call_noargs(PyObject *method) {
        return PyCFunction_GET_FUNCTION(method)(PyCFunction_GET_SELF(method), NULL);
    }
    """
    object call_noargs "placer_call_noargs"(object method)
    bint PyCFunction_Check(object op)
    int PyCFunction_GET_FLAGS(object op)
    int METH_NOARGS, METH_O, METH_VARARGS, METH_KEYWORDS, METH_FASTCALL, METH_METHOD


cdef object _copier(object method):
    """``method`` (a bound ``__copy__``) when it may be called through its C function, else
    None."""
    if PyCFunction_Check(method) and (
            PyCFunction_GET_FLAGS(method)
            & (METH_NOARGS | METH_O | METH_VARARGS | METH_KEYWORDS | METH_FASTCALL | METH_METHOD) == METH_NOARGS):
        return method
    return None


cdef int _offsets(object cls, tuple names, Py_ssize_t* offsets) except -1:
    """Fill the slot offsets of ``names`` in ``cls``; 0 when one is not a slot (or too many)."""
    cdef Py_ssize_t k
    if len(names) > MAX_FIELDS:
        return 0
    for k in range(len(names)):
        offsets[k] = slot_offset(cls, names[k])
        if offsets[k] < 0:
            return 0
    return 1


cdef object _template_copier(object template):
    """The C-callable ``__copy__`` of ``template`` when it is exactly a PodRequest, else None."""
    if type(template) is not PodRequest:
        return None
    return _copier(template.__copy__)


def common_pods(list entries, int milli, tuple copied, tuple targets, tuple defaulted, tuple defaults,
                object template):
    """The pods of a request's entries when every entry is one plain pod, else None.

    Parameters
    ----------
    entries : list of PodDoc
    milli : int
        A share is ``gpuMilli`` below it (then ``gpus`` must be 1).
    copied, targets : tuple of str
        The fields of an entry copied into its pod, and the pod's field each goes to.
    defaulted, defaults : tuple
        The other fields of an entry, and their defaults: a plain entry leaves each at it.
    template : PodRequest
        A pod with every field at its default: each pod starts as a copy of it.

    A plain entry asks for one GPU when it asks for a share and has a name free of control
    characters that no other entry has. None leaves the request to the general path, which
    says what is wrong where.
    """
    cdef Py_ssize_t i, k, n = len(entries), n_copied = len(copied), n_defaulted = len(defaulted)
    cdef Py_ssize_t sources[MAX_FIELDS]
    cdef Py_ssize_t slots[MAX_FIELDS]
    cdef Py_ssize_t checks[MAX_FIELDS]
    cdef list pods = [None] * n
    cdef set names = set()
    cdef object entry, name, gpus, gpu_milli, value, default, pod
    cdef object copy_pod = _template_copier(template)
    if (copy_pod is None or len(targets) != n_copied or len(defaults) != n_defaulted
            or not _offsets(PodDoc, copied, sources) or not _offsets(PodRequest, targets, slots)
            or not _offsets(PodDoc, defaulted, checks)):
        return None
    for i in range(n):
        entry = entries[i]
        for k in range(n_defaulted):
            value = field(entry, DOC, checks[k], defaulted[k])
            default = defaults[k]
            if value is not default and value != default:
                return None
        name = field(entry, DOC, D_NAME, "name")
        gpus = field(entry, DOC, D_GPUS, "gpus")
        gpu_milli = field(entry, DOC, D_GPU_MILLI, "gpu_milli")
        if <long>gpu_milli < milli and <long>gpus != 1:
            return None
        if _control(name):
            return None
        names.add(name)
        pod = call_noargs(copy_pod)
        for k in range(n_copied):
            set_slot(pod, slots[k], field(entry, DOC, sources[k], copied[k]))
        pods[i] = pod
    return pods if len(names) == n else None


cdef struct KeyCache:
    # keys met so far and their columns: entries made alike share their key objects, so a
    # pointer compare usually finds a key without hashing it; borrowed, from entries that
    # stay alive meanwhile
    PyObject* keys[16]
    Py_ssize_t columns[16]
    int count


cdef inline Py_ssize_t _column(KeyCache* cache, PyObject* key, dict columns) except -2:
    """The column of ``key`` in ``columns``; -1 for a key that is not a ``str`` there."""
    cdef int k
    cdef object found
    for k in range(cache.count):
        if cache.keys[k] == key:
            return cache.columns[k]
    if type(<object>key) is not str:
        return -1
    found = columns.get(<object>key)
    if found is None:
        return -1
    if cache.count < 16:
        cache.keys[cache.count] = key
        cache.columns[cache.count] = found
        cache.count += 1
    return found


def dict_pods(list entries, dict columns, tuple targets, tuple low, tuple high, Py_ssize_t name_min, int milli,
              object template, Py_ssize_t gpus_column, Py_ssize_t milli_column):
    """The pods of a request's entries when every entry is a dict of plain fields, else None.

    Parameters
    ----------
    entries : list
        The document's ``pods``, as given.
    columns : dict
        Key as written -> column: 0 for the name, then integers.
    targets : tuple of str
        Per column, the field of the pod it sets.
    low, high : tuple
        Per column, the bounds of its integers (inclusive; column 0's are not read).
    name_min : int
        The shortest name.
    milli : int
        A share is ``gpuMilli`` below it (then ``gpus`` must be 1).
    template : PodRequest
        A pod with every field at its default: each pod starts as a copy of it.
    gpus_column, milli_column : int
        The columns of ``gpus`` and ``gpuMilli``.

    An entry qualifies when it is a ``dict`` with a name and other keys among ``columns``
    only, each an ``int`` (not a bool) within bounds, and the name a ``str`` of at least
    ``name_min`` characters, free of control characters, that no other entry has.
    Anything else, even a null, leaves the request to the decoder, which says what is
    wrong where.
    """
    cdef Py_ssize_t i, k, n = len(entries), pos, column, n_columns = len(targets)
    cdef list pods = [None] * n
    cdef set names = set()
    cdef object entry, name, pod
    cdef object copy_pod = _template_copier(template)
    cdef PyObject* key
    cdef PyObject* value
    cdef int overflow
    cdef long long number, gpus, gpu_milli, default_gpus, default_milli
    cdef long long bounds[2 * MAX_FIELDS]
    cdef Py_ssize_t slots[MAX_FIELDS]
    cdef KeyCache cache
    cache.count = 0
    if len(low) != n_columns or len(high) != n_columns or not 0 < gpus_column < n_columns or not 0 < milli_column < n_columns:
        raise ValueError("dict_pods: a target and two bounds per column, gpus and gpuMilli among the columns")
    if copy_pod is None or not _offsets(PodRequest, targets, slots):
        return None
    default_gpus = template.gpus
    default_milli = template.gpu_milli
    for k in range(1, n_columns):
        bounds[2 * k] = low[k]
        bounds[2 * k + 1] = high[k]
    for i in range(n):
        entry = entries[i]
        if type(entry) is not dict:
            return None
        pod = call_noargs(copy_pod)
        name = None
        gpus = default_gpus
        gpu_milli = default_milli
        pos = 0
        while PyDict_Next(entry, &pos, &key, &value):
            column = _column(&cache, key, columns)
            if column < 0:
                return None
            if column == 0:
                if type(<object>value) is not str:
                    return None
                name = <object>value
            else:
                if type(<object>value) is not int:
                    return None
                number = PyLong_AsLongLongAndOverflow(<object>value, &overflow)
                if overflow or number < bounds[2 * column] or number > bounds[2 * column + 1]:
                    return None
                if column == gpus_column:
                    gpus = number
                elif column == milli_column:
                    gpu_milli = number
            set_slot(pod, slots[column], <object>value)
        if name is None or len(name) < name_min or _control(name):
            return None
        if gpu_milli < milli and gpus != 1:
            return None
        names.add(name)
        pods[i] = pod
    return pods if len(names) == n else None


cdef inline bint _bounded(object value, long long low, long long high):
    """Whether ``value`` is an ``int`` (not a bool) in low..high."""
    cdef int overflow
    cdef long long number
    if type(value) is not int:
        return False
    number = PyLong_AsLongLongAndOverflow(value, &overflow)
    return not overflow and low <= number <= high


cdef object _dict_pod(object entry, dict columns, KeyCache* cache, object copy_pod, Py_ssize_t name_min,
                      const long long* bounds):
    """The RunningPod of a pod entry as written, or None (see :func:`dict_nodes`)."""
    cdef Py_ssize_t pos = 0, column, k
    cdef PyObject* key
    cdef PyObject* value
    cdef object pod, gpus
    cdef bint named = False
    if type(entry) is not dict:
        return None
    pod = call_noargs(copy_pod)
    while PyDict_Next(entry, &pos, &key, &value):
        column = _column(cache, key, columns)
        if column < 0:
            return None
        if column == 0:
            if type(<object>value) is not str or len(<object>value) < name_min:
                return None
            set_slot(pod, P_NAME, <object>value)
            named = True
        elif column == 1:
            if type(<object>value) is not list:
                return None
            for k in range(len(<list>value)):
                if not _bounded((<list>value)[k], bounds[0], bounds[1]):
                    return None
            gpus = tuple(<list>value)
            set_slot(pod, P_GPUS, gpus)
        else:
            if not _bounded(<object>value, bounds[2 * column - 2], bounds[2 * column - 1]):
                return None
            set_slot(pod, P_CPU if column == 2 else P_MEM, <object>value)
    return pod if named else None


def dict_nodes(list entries, dict node_columns, dict pod_columns, object node_template, object pod_template,
               Py_ssize_t name_min, tuple bounds):
    """The nodes of a snapshot's entries when every entry is a dict of plain fields, else None.

    Parameters
    ----------
    entries : list
        The document's ``nodes``, as given.
    node_columns : dict
        Key as written -> column: 0 the name, 1 the type, 2 the pods.
    pod_columns : dict
        Key as written -> column: 0 the name, 1 the GPUs, 2 the CPU, 3 the memory.
    node_template, pod_template : Node, RunningPod
        Objects of exactly these classes with every other field at its default: each node
        and pod starts as a copy (the defaults are immutable, so copies share them).
    name_min : int
        The shortest name.
    bounds : tuple of 6 int
        The bounds (inclusive) of a GPU index, of the CPU and of the memory of a pod.

    A node qualifies when it is a ``dict`` with a name, a type and pods at most, the name
    and type ``str`` (the name at least ``name_min`` long) and the pods a ``list`` of
    dicts with a name and at most ``gpus`` (a ``list`` of indices), ``cpuMilli`` and
    ``memoryMiB``, every number an ``int`` (not a bool) within bounds. Anything else, even
    a null, leaves the snapshot to the decoder. Only the types and bounds are checked here:
    the rules between fields are the snapshot's checks, run on what this returns.
    """
    cdef Py_ssize_t i, k, n = len(entries), pos, column
    cdef list nodes = [None] * n
    cdef object entry, node, pod, copy_node, copy_pod
    cdef PyObject* key
    cdef PyObject* value
    cdef tuple pods
    cdef bint named
    cdef long long limits[6]
    cdef KeyCache node_keys
    cdef KeyCache pod_keys
    if (type(node_template) is not Node or type(pod_template) is not RunningPod or N_NAME < 0 or N_TYPE < 0
            or N_PODS < 0 or P_NAME < 0 or P_GPUS < 0 or P_CPU < 0 or P_MEM < 0):
        return None
    if len(bounds) != 6:
        raise ValueError("dict_nodes: 6 bounds")
    for k in range(6):
        limits[k] = bounds[k]
    copy_node = _copier(node_template.__copy__)
    copy_pod = _copier(pod_template.__copy__)
    if copy_node is None or copy_pod is None:
        return None
    node_keys.count = 0
    pod_keys.count = 0
    for i in range(n):
        entry = entries[i]
        if type(entry) is not dict:
            return None
        node = call_noargs(copy_node)
        named = False
        pos = 0
        while PyDict_Next(entry, &pos, &key, &value):
            column = _column(&node_keys, key, node_columns)
            if column < 0:
                return None
            if column == 0:
                if type(<object>value) is not str or len(<object>value) < name_min:
                    return None
                set_slot(node, N_NAME, <object>value)
                named = True
            elif column == 1:
                if type(<object>value) is not str:
                    return None
                set_slot(node, N_TYPE, <object>value)
            else:
                if type(<object>value) is not list:
                    return None
                pods = PyTuple_New(len(<list>value))
                for k in range(len(<list>value)):
                    pod = _dict_pod((<list>value)[k], pod_columns, &pod_keys, copy_pod, name_min, limits)
                    if pod is None:
                        return None
                    Py_INCREF(pod)
                    PyTuple_SET_ITEM(pods, k, pod)
                set_slot(node, N_PODS, pods)
        if not named:
            return None
        nodes[i] = node
    return nodes
