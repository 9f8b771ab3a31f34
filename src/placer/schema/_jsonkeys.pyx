# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Duplicate keys of a JSON text in one pass (JSON decoders keep the last one silently)."""

from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memchr, memcmp


cdef struct Key:
    Py_ssize_t start   # offset of the opening quote
    Py_ssize_t length  # bytes between the quotes
    unsigned long long hash


cdef int _compare(const void* a, const void* b) noexcept nogil:
    cdef const Key* x = <const Key*>a
    cdef const Key* y = <const Key*>b
    if x.hash != y.hash:
        return -1 if x.hash < y.hash else 1
    if x.length != y.length:
        return -1 if x.length < y.length else 1
    return -1 if x.start < y.start else (1 if x.start > y.start else 0)


cdef Py_ssize_t _duplicate_in(const unsigned char* text, Key* keys, Py_ssize_t n,
                              Py_ssize_t* first) noexcept nogil:
    """Offset of the later key of the earliest-ending duplicate pair among ``keys``, or -1."""
    cdef Py_ssize_t i, j, best = -1
    if n < 2:
        return -1
    if n <= 16:
        for j in range(1, n):
            for i in range(j):
                if keys[i].hash == keys[j].hash and keys[i].length == keys[j].length and memcmp(
                        text + keys[i].start, text + keys[j].start, keys[j].length) == 0:
                    first[0] = keys[i].start
                    return keys[j].start
        return -1
    qsort(keys, n, sizeof(Key), _compare)
    for j in range(1, n):
        i = j - 1
        if keys[i].hash == keys[j].hash and keys[i].length == keys[j].length and memcmp(
                text + keys[i].start, text + keys[j].start, keys[j].length) == 0:
            if best < 0 or keys[j].start < best:
                best = keys[j].start
                first[0] = keys[i].start
    return best


cdef inline Py_ssize_t _closing_quote(const unsigned char* text, Py_ssize_t pos, Py_ssize_t size) noexcept nogil:
    """Offset of the quote that closes a string whose text starts at ``pos``."""
    cdef const unsigned char* q
    cdef Py_ssize_t end, k
    while True:
        q = <const unsigned char*>memchr(text + pos, b'"', size - pos)
        if q == NULL:
            return size
        end = q - text
        k = end - 1
        while k >= pos and text[k] == b'\\':
            k -= 1
        if (end - 1 - k) % 2 == 0:
            return end
        pos = end + 1


cdef Py_ssize_t _scan(const unsigned char* text, Py_ssize_t size, Py_ssize_t* first,
                      int* escaped) noexcept nogil:
    cdef Py_ssize_t pos = 0, start, end, k, found = -1, depth = 0, at, other = -1
    cdef Py_ssize_t n_keys = 0, cap_keys = 256, cap_marks = 64
    cdef unsigned char c
    cdef unsigned long long h
    cdef Key* keys = <Key*>malloc(cap_keys * sizeof(Key))
    cdef Py_ssize_t* marks = <Py_ssize_t*>malloc(cap_marks * sizeof(Py_ssize_t))
    cdef void* grown
    if keys == NULL or marks == NULL:
        free(keys)
        free(marks)
        return -2
    while pos < size:
        c = text[pos]
        if c == b'"':
            start = pos
            end = _closing_quote(text, pos + 1, size)
            pos = end + 1
            k = pos
            while k < size and (text[k] == b' ' or text[k] == b'\t' or text[k] == b'\n' or text[k] == b'\r'):
                k += 1
            if k < size and text[k] == b':' and depth > 0:
                if memchr(text + start + 1, b'\\', end - start - 1) != NULL:
                    escaped[0] = 1
                h = 14695981039346656037ULL
                for k in range(start + 1, end):
                    h = (h ^ text[k]) * 1099511628211ULL
                if n_keys == cap_keys:
                    cap_keys *= 2
                    grown = realloc(keys, cap_keys * sizeof(Key))
                    if grown == NULL:
                        free(keys)
                        free(marks)
                        return -2
                    keys = <Key*>grown
                keys[n_keys].start = start
                keys[n_keys].length = end - start - 1
                keys[n_keys].hash = h
                n_keys += 1
            continue
        if c == b'{':
            if depth == cap_marks:
                cap_marks *= 2
                grown = realloc(marks, cap_marks * sizeof(Py_ssize_t))
                if grown == NULL:
                    free(keys)
                    free(marks)
                    return -2
                marks = <Py_ssize_t*>grown
            marks[depth] = n_keys
            depth += 1
        elif c == b'}' and depth > 0:
            depth -= 1
            at = _duplicate_in(text, keys + marks[depth], n_keys - marks[depth], &other)
            if at >= 0 and (found < 0 or at < found):
                found = at
                first[0] = other
            n_keys = marks[depth]
        pos += 1
    free(keys)
    free(marks)
    return found


def first_duplicate_key(const unsigned char[::1] text):
    """Find the earliest repeated key of any object of a well-formed JSON text.

    Parameters
    ----------
    text : bytes
        UTF-8 JSON that a decoder has already accepted.

    Returns
    -------
    tuple or None
        ``(second, first)``: byte offsets of the opening quotes of the repeated key and of
        its first occurrence; ``None`` when no object repeats a key. Keys are compared as
        written; ``("escaped", -1)`` says that some key holds an escape, so keys written
        differently may still be equal and the caller must compare decoded keys.
    """
    cdef Py_ssize_t first = -1
    cdef int escaped = 0
    cdef Py_ssize_t found
    if text.shape[0] == 0:
        return None
    with nogil:
        found = _scan(&text[0], text.shape[0], &first, &escaped)
    if found == -2:
        raise MemoryError()
    if found >= 0:
        return (found, first)
    if escaped:
        return ("escaped", -1)
    return None
