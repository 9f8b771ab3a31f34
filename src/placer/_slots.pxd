# cython: language_level=3
"""Reading the fields of msgspec Structs from compiled loops at the cost of a load.

A Struct keeps each field in an object slot at a fixed offset, described by a member
descriptor (``PyMemberDef``, type ``T_OBJECT_EX``) on its class. A generic attribute read
from C looks the name up along the class's MRO for every object (about 150 instructions);
the interpreter caches that lookup, compiled code does not. Here the offset is looked up
once per class and field, and each read is a load: only for objects whose type is exactly
that class (anything else, a subclass included, is read by name).

A module keeps each class it reads as a ``PyTypeObject*`` and each offset as a
``Py_ssize_t``, both module-level C variables: :func:`field` then costs a compare and a
load, with no lookup of a module global.
"""
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

cdef extern from *:
    """
    static inline PyObject *placer_slot_or_null(PyObject *obj, PyTypeObject *cls, Py_ssize_t offset) {
        return (Py_TYPE(obj) == cls && offset >= 0) ? *(PyObject **)((char *)obj + offset) : NULL;
    }
    static inline PyObject *placer_field(PyObject *obj, PyTypeObject *cls, Py_ssize_t offset, PyObject *name) {
        PyObject *value = placer_slot_or_null(obj, cls, offset);
        if (value != NULL) {
            Py_INCREF(value);
            return value;
        }
        return PyObject_GetAttr(obj, name);
    }
    static inline int placer_truth(PyObject *value, PyObject *empty) {
        if (value == Py_None || value == Py_False || value == empty) return 0;
        if (value == Py_True) return 1;
        if (PyTuple_CheckExact(value)) return PyTuple_GET_SIZE(value) != 0;
        return PyObject_IsTrue(value);
    }
    static inline int placer_field_truth(PyObject *obj, PyTypeObject *cls, Py_ssize_t offset, PyObject *name,
                                         PyObject *empty) {
        PyObject *value = placer_slot_or_null(obj, cls, offset);
        int truth;
        if (value != NULL) return placer_truth(value, empty);
        value = PyObject_GetAttr(obj, name);
        if (value == NULL) return -1;
        truth = placer_truth(value, empty);
        Py_DECREF(value);
        return truth;
    }
    static inline int placer_field_is_none(PyObject *obj, PyTypeObject *cls, Py_ssize_t offset, PyObject *name) {
        PyObject *value = placer_slot_or_null(obj, cls, offset);
        if (value != NULL) return value == Py_None;
        value = PyObject_GetAttr(obj, name);
        int none;
        if (value == NULL) return -1;
        none = value == Py_None;
        Py_DECREF(value);
        return none;
    }
    """
    object field "placer_field"(object obj, PyTypeObject* cls, Py_ssize_t offset, object name)
    int truthy "placer_field_truth"(object obj, PyTypeObject* cls, Py_ssize_t offset, object name,
                                    PyObject* empty) except -1
    int is_none "placer_field_is_none"(object obj, PyTypeObject* cls, Py_ssize_t offset, object name) except -1

cdef enum:
    _T_OBJECT_EX = 16  # structmember.h: an object slot that raises AttributeError when NULL


cdef inline Py_ssize_t slot_offset(object cls, str name):
    """The offset of field ``name`` in instances of ``cls``; -1 when it is not an object
    slot (then :func:`field` reads it by name: a msgspec that stored fields otherwise would
    make placer slower, not wrong)."""
    from types import MemberDescriptorType

    descr = getattr(cls, name)
    if type(descr) is not MemberDescriptorType or (<PyMemberDescrObject*><PyObject*>descr).d_member.type != _T_OBJECT_EX:
        return -1
    return (<PyMemberDescrObject*><PyObject*>descr).d_member.offset


# field(obj, cls, offset, name): field ``name`` of ``obj``; a load when ``obj`` is exactly a
#     ``cls`` and the slot is set, else a read by name (which raises as Python would).
# truthy(obj, cls, offset, name, empty): whether that field is truthy, without a reference;
#     ``empty`` is an object known to be falsy (the model's empty mapping) and skips a call.
# is_none(obj, cls, offset, name): whether that field is None.


cdef inline void set_slot(object obj, Py_ssize_t offset, object value):
    """Store ``value`` in the slot at ``offset`` of ``obj`` (its type checked by the caller),
    as ``msgspec.structs.force_setattr`` does for a frozen Struct."""
    cdef PyObject** where = <PyObject**>((<char*><PyObject*>obj) + offset)
    cdef PyObject* old = where[0]
    Py_INCREF(value)
    where[0] = <PyObject*>value
    Py_XDECREF(old)
