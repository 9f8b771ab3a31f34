# cython: language_level=3
"""Reading the fields of msgspec Structs from compiled loops at the cost of a load.

A Struct keeps each field in an object slot at a fixed offset, described by a member
descriptor (``PyMemberDef``, type ``T_OBJECT_EX``) on its class. A generic attribute read
from C looks the name up along the class's MRO for every object (about 150 instructions);
the interpreter caches that lookup, compiled code does not. Here the offset is looked up
once per class and field, and each read is a load: only for objects whose type is exactly
that class (anything else, a subclass included, takes the generic read: :func:`field`).
"""
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_TYPE, Py_XDECREF

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

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


cdef inline object slot(object obj, Py_ssize_t offset):
    """The object in the slot at ``offset`` of ``obj`` (its type checked by the caller)."""
    cdef PyObject* value = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
    if value == NULL:
        raise AttributeError("a field of a Struct is not set")
    return <object>value


cdef inline object field(object obj, object cls, Py_ssize_t offset, str name):
    """Field ``name`` of ``obj``: a load when ``obj`` is exactly a ``cls``."""
    if Py_TYPE(obj) == <PyTypeObject*>cls and offset >= 0:
        return slot(obj, offset)
    return getattr(obj, name)


cdef inline void set_slot(object obj, Py_ssize_t offset, object value):
    """Store ``value`` in the slot at ``offset`` of ``obj`` (its type checked by the caller),
    as ``msgspec.structs.force_setattr`` does for a frozen Struct."""
    cdef PyObject** where = <PyObject**>((<char*><PyObject*>obj) + offset)
    cdef PyObject* old = where[0]
    Py_INCREF(value)
    where[0] = <PyObject*>value
    Py_XDECREF(old)
