/* The gated consumers' first look at a fetched batch, in one pass over the records' fields.
 *
 * A batch is handed out as it came when no record is an error event, none may carry an epoch
 * stamp (a header), and every partition is open through its last record. Learning that through
 * confluent-kafka's methods costs three calls a record (error(), headers(), partition()): about
 * 170 ns, an eighth of the raw client's whole time per record at its full rate on Kafka. This
 * module reads the same fields from confluent-kafka's Message struct: a few ns a record.
 *
 * The same pass finds misplaced records (ordo.epochs.placement): given ``rules`` (partition ->
 * its checked offset ranges, newest first, each (start, end, count, earlier counts, ...)), a
 * keyed record inside a range whose murmur2 the range's count puts in another partition and one
 * of the earlier counts in this one. Only records of partitions with ranges are hashed: murmur2
 * here, a few ns for a short key, as in _fastproduce.c.
 *
 * That struct is private to confluent-kafka, so this module mirrors its first fields, the ones
 * read here (``MessageMirror``, as in confluent-kafka 2.x's confluent_kafka.h), and is used only
 * after the mirror is checked (_batch_scan._checked_c_scan): the Message type must be at
 * least as large as the mirror (``FIELDS_END``), so every read stays inside the object, and
 * Messages built with known partitions, offsets, keys, errors and headers must read back as
 * their methods say. That pins ``headers`` and ``error``, and so the one pointer between them,
 * ``c_headers``, which a built Message never sets. Of what is read, only a key that is exactly
 * bytes is dereferenced (hashed); the rest is compared with NULL and None or read as numbers.
 * When the check fails, or this module was not built, the Python twin (_batch_scan.scan_python)
 * serves; tests hold the two equal on consumed batches. Records of any other type are refused.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#include "_murmur2.h"

typedef struct {
    PyObject_HEAD
    PyObject *topic;
    PyObject *value;
    PyObject *key;
    PyObject *headers;   /* NULL until headers() converts c_headers, or set by the constructor */
    void *c_headers;     /* librdkafka's headers of a consumed record, NULL when it has none */
    PyObject *error;     /* Py_None for a record, a KafkaError for an event */
    int32_t partition;
    int64_t offset;
    /* further fields are not read */
} MessageMirror;

static PyObject *message_type; /* confluent_kafka.Message */

/* One checked offset range of a partition (ordo.epochs.placement.Check). */
typedef struct {
    int64_t start, end, count;
    PyObject *earlier; /* borrowed from the rules: a tuple of positive ints */
} Range;

typedef struct {
    Range *items;
    Py_ssize_t size, capacity;
} Ranges;

static int
read_count(PyObject *number, int64_t *out)
{
    long long value = PyLong_AsLongLong(number);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value < 1) {
        PyErr_SetString(PyExc_ValueError, "scan(): a partition count must be at least 1");
        return -1;
    }
    *out = value;
    return 0;
}

/* ranges = rules[partition] (none when absent), checked and read into C. */
static int
load_ranges(PyObject *rules, int32_t partition, Ranges *ranges)
{
    ranges->size = 0;
    PyObject *key = PyLong_FromLong(partition);
    if (key == NULL)
        return -1;
    PyObject *found = PyDict_GetItemWithError(rules, key); /* borrowed */
    Py_DECREF(key);
    if (found == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(found)) {
        PyErr_Format(PyExc_TypeError, "scan(): rules[%d] must be a tuple of Check", (int)partition);
        return -1;
    }
    Py_ssize_t size = PyTuple_GET_SIZE(found);
    if (size > ranges->capacity) {
        Range *grown = PyMem_Realloc(ranges->items, (size_t)size * sizeof(Range));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        ranges->items = grown;
        ranges->capacity = size;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *check = PyTuple_GET_ITEM(found, i);
        Range *range = &ranges->items[i];
        if (!PyTuple_Check(check) || PyTuple_GET_SIZE(check) < 4 || !PyTuple_Check(PyTuple_GET_ITEM(check, 3))) {
            PyErr_Format(PyExc_TypeError, "scan(): rules[%d] must hold (start, end, count, earlier, ...)",
                         (int)partition);
            return -1;
        }
        range->start = PyLong_AsLongLong(PyTuple_GET_ITEM(check, 0));
        if (range->start == -1 && PyErr_Occurred())
            return -1;
        range->end = PyLong_AsLongLong(PyTuple_GET_ITEM(check, 1));
        if (range->end == -1 && PyErr_Occurred())
            return -1;
        if (read_count(PyTuple_GET_ITEM(check, 2), &range->count) < 0)
            return -1;
        range->earlier = PyTuple_GET_ITEM(check, 3);
        int64_t earlier;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(range->earlier); j++)
            if (read_count(PyTuple_GET_ITEM(range->earlier, j), &earlier) < 0)
                return -1;
    }
    ranges->size = size;
    return 0;
}

/* Whether the record of ``partition`` at ``offset`` with ``key`` is misplaced (see above). */
static int
misplaced(const Ranges *ranges, int32_t partition, int64_t offset, PyObject *key)
{
    for (Py_ssize_t i = 0; i < ranges->size; i++) {
        const Range *range = &ranges->items[i];
        if (offset < range->start || offset >= range->end)
            continue;
        uint64_t h = (uint32_t)murmur2((const unsigned char *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) &
                     0x7fffffffU;
        if (h % (uint64_t)range->count == (uint64_t)partition)
            return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(range->earlier); j++) {
            /* checked when loaded: a positive int that fits */
            uint64_t count = (uint64_t)PyLong_AsLongLong(PyTuple_GET_ITEM(range->earlier, j));
            if (h % count == (uint64_t)partition)
                return 1;
        }
        return 0;
    }
    return 0;
}

/* lasts[partition] = message: the last record of a run of that partition's records */
static int
set_last(PyObject *lasts, int32_t partition, PyObject *message)
{
    PyObject *key = PyLong_FromLong(partition);
    if (key == NULL)
        return -1;
    int result = PyDict_SetItem(lasts, key, message);
    Py_DECREF(key);
    return result;
}

static int
append_index(PyObject *list, Py_ssize_t index)
{
    PyObject *number = PyLong_FromSsize_t(index);
    if (number == NULL)
        return -1;
    int result = PyList_Append(list, number);
    Py_DECREF(number);
    return result;
}

/* scan(messages, rules=None) -> (any_error, any_headers, {partition: its last message},
 *                                [index of each misplaced record])
 *
 * ``any_headers`` is True when a record may have headers (a record whose headers() is an empty
 * list counts): the caller then looks at them, so an answer too cautious costs time only. */
static PyObject *
scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "scan() takes a list of messages and optional rules");
        return NULL;
    }
    PyObject *messages = args[0];
    PyObject *rules = nargs == 2 && args[1] != Py_None ? args[1] : NULL;
    if (!PyList_CheckExact(messages)) {
        PyErr_SetString(PyExc_TypeError, "scan() takes a list of confluent_kafka.Message");
        return NULL;
    }
    if (rules != NULL && !PyDict_Check(rules)) {
        PyErr_SetString(PyExc_TypeError, "scan(): rules must be a dict {partition: tuple of Check}");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(messages);
    int any_error = 0, any_headers = 0;
    PyObject *lasts = PyDict_New();
    PyObject *found = PyList_New(0);
    Ranges ranges = {NULL, 0, 0};
    int32_t ranges_partition = 0;
    int ranges_loaded = 0;
    if (lasts == NULL || found == NULL)
        goto fail;
    int32_t run_partition = 0;
    PyObject *run_last = NULL; /* borrowed from the list */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(messages, i);
        if (Py_TYPE(item) != (PyTypeObject *)message_type) {
            PyErr_Format(PyExc_TypeError, "scan() takes confluent_kafka.Message only, got %R", Py_TYPE(item));
            goto fail;
        }
        MessageMirror *message = (MessageMirror *)item;
        int is_error = message->error != NULL && message->error != Py_None;
        if (is_error)
            any_error = 1;
        if ((message->headers != NULL && message->headers != Py_None) || message->c_headers != NULL)
            any_headers = 1;
        if (run_last != NULL && message->partition != run_partition
            && set_last(lasts, run_partition, run_last) < 0)
            goto fail;
        run_partition = message->partition;
        run_last = item;
        if (rules == NULL || is_error || message->key == NULL || !PyBytes_CheckExact(message->key))
            continue;
        if (!ranges_loaded || message->partition != ranges_partition) {
            if (load_ranges(rules, message->partition, &ranges) < 0)
                goto fail;
            ranges_partition = message->partition;
            ranges_loaded = 1;
        }
        if (ranges.size && misplaced(&ranges, message->partition, message->offset, message->key)
            && append_index(found, i) < 0)
            goto fail;
    }
    if (run_last != NULL && set_last(lasts, run_partition, run_last) < 0)
        goto fail;
    PyMem_Free(ranges.items);
    return Py_BuildValue("(OONN)", any_error ? Py_True : Py_False, any_headers ? Py_True : Py_False, lasts,
                         found);
fail:
    PyMem_Free(ranges.items);
    Py_XDECREF(lasts);
    Py_XDECREF(found);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "(any error, any headers, {partition: last message}, [misplaced indices]) of a fetched batch"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ordo._fastscan", "The gated consumers' look at a fetched batch in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastscan(void)
{
    PyObject *kafka = PyImport_ImportModule("confluent_kafka");
    if (kafka == NULL)
        return NULL;
    message_type = PyObject_GetAttrString(kafka, "Message");
    Py_DECREF(kafka);
    if (message_type == NULL)
        return NULL;
    if (!PyType_Check(message_type)) {
        PyErr_SetString(PyExc_ImportError, "confluent_kafka.Message is not a type");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    long fields_end = (long)(offsetof(MessageMirror, offset) + sizeof(int64_t));
    if (PyModule_AddIntConstant(m, "FIELDS_END", fields_end) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
