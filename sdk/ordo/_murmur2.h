/* murmur2 as the Java client's Utils.murmur2 computes it (signed 32-bit), as librdkafka's
 * murmur2_random hashes too: the one copy both C accelerators include (_fastproduce.c places
 * records by it, _fastscan.c checks where they were placed). Held equal to the pure-Python twin
 * (ordo.partitioners) and the Java client's published values by tests. */
#ifndef ORDO_MURMUR2_H
#define ORDO_MURMUR2_H

#include <Python.h>
#include <stdint.h>

static inline int32_t
murmur2(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cU ^ (uint32_t)length;
    Py_ssize_t i, tail = length & ~(Py_ssize_t)3;
    for (i = 0; i < tail; i += 4) {
        uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 | (uint32_t)data[i + 2] << 16 |
                     (uint32_t)data[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)data[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= data[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

#endif /* ORDO_MURMUR2_H */
