// Device copies of methods' K/V rows (see cuda_kvmirror.h): a mirror of host rows kept
// up to date from a valid mark, or a working set of slots; decode attention over them
// through kb_cuda_decode_dev, with this copy's own small device buffers for the query,
// output, indices, biases and probabilities (so that freeing a copy returns all of its
// bytes to the tracked allocator).
extern "C" {
#include "core.h"
#include "kvtype.h"
}
#include "cuda_backend.h"
#include "cuda_kvmirror.h"
#include "cuda_util.h"

#include <climits>
#include <cstring>
#include <new>
#include <vector>

using kbcuda::DevBuf;
using kbcuda::release;

enum { kNone, kMirror, kWorkingSet };

struct kb_kvdev {
    int d = 0;
    int type = KB_F32;            // the rows' element type (kvtype.h), as the host stores them
    size_t rb = 0;                // bytes per row: d * kb_kvtype_bytes(type)
    size_t hb = 0;                // bytes per host row: rb, or d floats for a copy from f32 rows
    std::vector<uint16_t> narrow; // from f32 rows to 16-bit: the rows of one upload, narrowed
    const char *what = "KV rows";
    char *rows = nullptr;         // K [cap][d], then V [cap][d], elements of type
    int cap = 0;
    int mode = kNone;
    int synced = 0;               // mirror: device rows [0, synced) hold host rows [0, synced)
    std::vector<int32_t> slot_of; // working set: host row -> slot, -1 if not resident
    std::vector<int32_t> row_of;  // slot -> host row, -1 if free
    std::vector<unsigned> stamp;  // slot -> the last call that listed its row
    unsigned gen = 0;
    std::vector<int32_t> slots;   // the listed rows' slots, for the decode
    bool async_pending = false;   // copies on the copy stream not yet fenced
    long uploaded = 0;
    DevBuf q, out, idx, bias, probs;
};

namespace {

void forget_slots(kb_kvdev *m) {
    m->slot_of.assign(m->slot_of.size(), -1);
    m->row_of.assign((size_t)m->cap, -1);
    m->stamp.assign((size_t)m->cap, 0);
}

void set_mode(kb_kvdev *m, int mode) {
    if (m->mode == mode) return;
    m->mode = mode;
    m->synced = 0;
    forget_slots(m);
}

// Room for need rows, growing to max(need, min(2 cap, bound)); a first allocation with
// to_bound takes bound rows at once (a mirror: the host store's capacity, so the rows a
// decode appends after the prefill do not force a second allocation, and an upload of
// every row again, at the first token). The old rows are freed before the new ones are
// allocated, so the peak never counts both; contents are lost.
int grow(kb_kvdev *m, int need, int bound, bool to_bound = false) {
    if (need <= m->cap) return 0;
    long want = 2L * m->cap;
    if (to_bound && m->cap == 0) want = bound;
    if (want > bound) want = bound;
    if (want < need) want = need;
    kb_cuda_free(m->rows);
    m->rows = nullptr;
    m->cap = 0;
    m->synced = 0;
    forget_slots(m);
    m->rows = (char *)kb_cuda_malloc((size_t)want * 2 * m->rb, m->what);
    if (!m->rows) return -1;
    m->cap = (int)want;
    forget_slots(m);
    return 0;
}

int bad_alloc_msg(const kb_kvdev *m) {
    fprintf(stderr, "kb cuda kv rows (%s): out of host memory for narrowing rows\n", m->what);
    return -1;
}

// Row r of K, of V on the device; row r of host rows.
char *krow(const kb_kvdev *m, int r) { return m->rows + (size_t)r * m->rb; }
char *vrow(const kb_kvdev *m, int r) { return m->rows + ((size_t)m->cap + r) * m->rb; }
const void *hrow(const kb_kvdev *m, const void *rows, int r) { return (const char *)rows + (size_t)r * m->hb; }

// n host rows at src as the device stores them: src itself, or (a copy from f32 rows to
// 16-bit ones) narrowed into m->narrow (exact for values the type holds). NULL: no memory.
const void *as_stored(kb_kvdev *m, const void *src, int n) {
    if (m->hb == m->rb) return src;
    const size_t e = (size_t)n * m->d;
    try {
        m->narrow.resize(e);
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
    kb_kv_put(m->type, m->narrow.data(), (const float *)src, (int)e);
    return m->narrow.data();
}

// Device rows [r0, r0 + n) = host K, V [n][d], on the default stream (in order with the kernels).
int put(kb_kvdev *m, int r0, const void *K, const void *V, int n) {
    if (n <= 0) return 0;
    const size_t bytes = (size_t)n * m->rb;
    const void *k = as_stored(m, K, n);
    if (!k) return bad_alloc_msg(m);
    CK(cudaMemcpy(krow(m, r0), k, bytes, cudaMemcpyHostToDevice));
    const void *v = as_stored(m, V, n);
    if (!v) return bad_alloc_msg(m);
    CK(cudaMemcpy(vrow(m, r0), v, bytes, cudaMemcpyHostToDevice));
    m->uploaded += n;
    return 0;
}

int bad(const kb_kvdev *m, const char *why) {
    fprintf(stderr, "kb cuda kv rows (%s): %s\n", m->what, why);
    return -1;
}

// Attention with a->idx replaced by idx (device rows, or null for 0 .. n-1).
int decode_rows(kb_kvdev *m, const kb_decode_args *a, const int32_t *idx) {
    const int g = a->g, d = a->d, n = a->n;
    if (d != m->d || g < 1 || n < 0 || !a->q || !a->out) return bad(m, "decode with a bad shape or no q/out");
    if (n > 0 && !m->rows) return bad(m, "decode before any rows are on the device");
    if (idx) {
        for (int i = 0; i < n; i++)
            if (idx[i] < 0 || idx[i] >= m->cap) return bad(m, "decode index outside the device rows");
    } else if (n > m->cap) {
        return bad(m, "decode over more rows than the device holds");
    }
    const size_t f = sizeof(float), gd = (size_t)g * d * f;
    if (kbcuda::reserve(m->q, gd, "decode query (KV rows)") || kbcuda::reserve(m->out, gd, "decode output (KV rows)") ||
        (idx && n && kbcuda::reserve(m->idx, (size_t)n * sizeof(int32_t), "decode indices (KV rows)")) ||
        (a->bias && n && kbcuda::reserve(m->bias, (size_t)n * f, "decode biases (KV rows)")) ||
        (a->probs && n && kbcuda::reserve(m->probs, (size_t)g * n * f, "decode probabilities (KV rows)")))
        return -1;
    CK(cudaMemcpy(m->q.p, a->q, gd, cudaMemcpyHostToDevice));
    if (idx && n) CK(cudaMemcpy(m->idx.p, idx, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice));
    if (a->bias && n) CK(cudaMemcpy(m->bias.p, a->bias, (size_t)n * f, cudaMemcpyHostToDevice));
    if (m->async_pending) {   // the decode kernels wait for rows put on the copy stream
        if (kb_cuda_copy_fence()) return -1;
        m->async_pending = false;
    }
    kb_decode_args da = {g,
                         d,
                         n,
                         (const float *)m->q.p,
                         m->rows,
                         m->rows ? vrow(m, 0) : nullptr,
                         idx && n ? (const int32_t *)m->idx.p : nullptr,
                         a->bias && n ? (const float *)m->bias.p : nullptr,
                         (float *)m->out.p,
                         a->probs && n ? (float *)m->probs.p : nullptr,
                         m->type};
    if (kb_cuda_decode_dev(&da)) return -1;
    CK(cudaMemcpy(a->out, m->out.p, gd, cudaMemcpyDeviceToHost));   // waits for the kernels
    if (a->probs && n) CK(cudaMemcpy(a->probs, m->probs.p, (size_t)g * n * f, cudaMemcpyDeviceToHost));
    return 0;
}

// Working set: slots for the rows listed in rows[0..n) (host rows < host_n; rows from
// valid on are treated as new), uploading those not resident; m->slots[i] = rows[i]'s slot.
int place(kb_kvdev *m, const void *K, const void *V, int host_n, int valid, const int32_t *rows, int n) {
    for (int i = 0; i < n; i++)
        if (rows[i] < 0 || rows[i] >= host_n) return bad(m, "working-set row outside the host rows");
    if (valid > host_n) valid = host_n;
    if (valid < 0) valid = 0;
    for (int s = 0; s < m->cap; s++)   // rows that changed (or are gone) lose their slots
        if (m->row_of[s] >= valid) {
            if (m->row_of[s] < (int)m->slot_of.size()) m->slot_of[m->row_of[s]] = -1;
            m->row_of[s] = -1;
        }
    m->slot_of.resize((size_t)host_n, -1);
    if (grow(m, n, INT_MAX)) return -1;
    if (++m->gen == 0) {   // the stamps wrapped: clear them
        m->stamp.assign(m->stamp.size(), 0);
        m->gen = 1;
    }
    for (int i = 0; i < n; i++)
        if (m->slot_of[rows[i]] >= 0) m->stamp[m->slot_of[rows[i]]] = m->gen;
    // new rows take the free slots in ascending order: rows listed in ascending order
    // then fill runs of slots, uploaded with one copy per run
    m->slots.resize((size_t)n);
    int free_slot = 0, run_row = -1, run_slot = -1, run_len = 0;
    for (int i = 0; i < n; i++) {
        int r = rows[i];
        if (m->slot_of[r] < 0) {
            while (free_slot < m->cap && m->stamp[free_slot] == m->gen) free_slot++;
            if (free_slot >= m->cap) return bad(m, "no free slot (internal error)");
            int s = free_slot;
            if (m->row_of[s] >= 0) m->slot_of[m->row_of[s]] = -1;
            m->row_of[s] = r;
            m->slot_of[r] = s;
            m->stamp[s] = m->gen;
            if (run_len && r == run_row + run_len && s == run_slot + run_len) {
                run_len++;
            } else {
                if (run_len && put(m, run_slot, hrow(m, K, run_row), hrow(m, V, run_row), run_len)) return -1;
                run_row = r, run_slot = s, run_len = 1;
            }
        }
        m->slots[i] = m->slot_of[r];
    }
    if (run_len && put(m, run_slot, hrow(m, K, run_row), hrow(m, V, run_row), run_len)) return -1;
    return 0;
}

}  // namespace

extern "C" int kb_kvdev_active(void) {
    const kb_backend *b = kb_get();
    return b && b != kb_cpu() && b == kb_cuda_backend(nullptr);
}

extern "C" kb_kvdev *kb_kvdev_new(int d, const char *what) { return kb_kvdev_new_typed(d, KB_F32, what); }

extern "C" kb_kvdev *kb_kvdev_new_typed(int d, int type, const char *what) {
    kb_kvdev *m = kb_kvdev_new_from_f32(d, type, what);
    if (m) m->hb = m->rb;
    return m;
}

extern "C" kb_kvdev *kb_kvdev_new_from_f32(int d, int type, const char *what) {
    if (d < 1) {
        fprintf(stderr, "kb cuda kv rows: head dim %d\n", d);
        return nullptr;
    }
    if (type != KB_F32 && type != KB_F16 && type != KB_BF16) {
        fprintf(stderr, "kb cuda kv rows: unknown element type %d\n", type);
        return nullptr;
    }
    kb_kvdev *m = new (std::nothrow) kb_kvdev();
    if (!m) {
        fprintf(stderr, "kb cuda kv rows: out of host memory\n");
        return nullptr;
    }
    m->d = d;
    m->type = type;
    m->rb = (size_t)d * kb_kvtype_bytes(type);
    m->hb = (size_t)d * sizeof(float);
    if (what) m->what = what;
    return m;
}

extern "C" void kb_kvdev_free(kb_kvdev *m) {
    if (!m) return;
    kb_cuda_free(m->rows);
    release(m->q);
    release(m->out);
    release(m->idx);
    release(m->bias);
    release(m->probs);
    delete m;
}

extern "C" size_t kb_kvdev_bytes(const kb_kvdev *m) {
    if (!m) return 0;
    size_t b = (size_t)m->cap * 2 * m->rb;
    for (const DevBuf *x : {&m->q, &m->out, &m->idx, &m->bias, &m->probs}) b += x->p ? x->cap : 0;
    return b;
}

extern "C" int kb_kvdev_rows(const kb_kvdev *m) { return m ? m->cap : 0; }
extern "C" long kb_kvdev_uploaded(const kb_kvdev *m) { return m ? m->uploaded : 0; }

extern "C" int kb_kvdev_type(const kb_kvdev *m) { return m ? m->type : KB_F32; }

extern "C" int kb_kvdev_sync(kb_kvdev *m, const void *K, const void *V, int n, int host_cap, int *valid) {
    if (n < 0 || (n > 0 && (!K || !V))) return bad(m, "sync of bad host rows");
    set_mode(m, kMirror);
    if (grow(m, n, host_cap > n ? host_cap : n, true)) return -1;
    int from = *valid < m->synced ? *valid : m->synced;
    if (from > n) from = n;
    if (from < 0) from = 0;
    m->synced = from;
    if (put(m, from, hrow(m, K, from), hrow(m, V, from), n - from)) return -1;
    m->synced = n;
    *valid = n;
    return 0;
}

extern "C" int kb_kvdev_reserve(kb_kvdev *m, int rows) {
    if (rows < 0) return bad(m, "reserve of a negative row count");
    return grow(m, rows, rows);
}

extern "C" int kb_kvdev_put_async(kb_kvdev *m, int r0, const void *K, const void *V, int n) {
    if (r0 < 0 || n < 0 || (long)r0 + n > m->cap || (n > 0 && (!K || !V)))
        return bad(m, "put outside the reserved rows");
    if (n == 0) return 0;
    if (m->hb != m->rb) return bad(m, "asynchronous put of f32 rows into 16-bit rows (narrowing is synchronous)");
    const size_t bytes = (size_t)n * m->rb;
    if (m->synced > r0) m->synced = r0;   // a mirror's rows from r0 on are no longer the host's
    for (int s = r0; s < r0 + n && s < (int)m->row_of.size(); s++)
        if (m->row_of[s] >= 0) {   // nor do these slots hold their rows any more
            m->slot_of[m->row_of[s]] = -1;
            m->row_of[s] = -1;
        }
    m->async_pending = true;
    if (kb_cuda_copy_h2d_async(krow(m, r0), K, bytes) || kb_cuda_copy_h2d_async(vrow(m, r0), V, bytes))
        return -1;
    m->uploaded += n;
    return 0;
}

extern "C" int kb_kvdev_rows_dev(kb_kvdev *m, int r0, int n, void **K, void **V) {
    if (r0 < 0 || n < 0 || (long)r0 + n > m->cap || !m->rows) return bad(m, "device rows outside the reserved rows");
    if (m->synced > r0) m->synced = r0;   // as kb_kvdev_put_async: no longer the host's rows
    for (int s = r0; s < r0 + n && s < (int)m->row_of.size(); s++)
        if (m->row_of[s] >= 0) {
            m->slot_of[m->row_of[s]] = -1;
            m->row_of[s] = -1;
        }
    *K = krow(m, r0);
    *V = vrow(m, r0);
    return 0;
}

extern "C" int kb_kvdev_decode(kb_kvdev *m, const kb_decode_args *a) { return decode_rows(m, a, a->idx); }

// kb_kvdev_decode_many's buffers: inputs packed as [q of every call][bias of every call]
// (floats) and [idx of every call], outputs [out of every call]; pinned copies on the host.
struct kb_kvdev_batch {
    DevBuf in, idx, out;
    kbcuda::HostBuf hin, hidx, hout;
};

namespace {

size_t round4(size_t x) { return (x + 3) & ~(size_t)3; }   // 16-byte aligned queries (vec4 loads)

int decode_many(kb_kvdev_batch *b, kb_kvdev *const *ms, const kb_decode_args *as, int n) {
    size_t nq = 0, nb = 0;   // floats of queries (and outputs), entries
    for (int i = 0; i < n; i++) {
        const kb_kvdev *m = ms[i];
        const kb_decode_args *a = &as[i];
        if (!m) {
            fprintf(stderr, "kb cuda kv rows: decode_many without a device copy for call %d\n", i);
            return -1;
        }
        if (a->d != m->d || a->g < 1 || a->n < 0 || !a->q || !a->out || a->probs)
            return bad(m, "decode_many with a bad shape, no q/out, or probs");
        if (a->n > 0 && !m->rows) return bad(m, "decode_many before any rows are on the device");
        if (a->idx) {
            for (int k = 0; k < a->n; k++)
                if (a->idx[k] < 0 || a->idx[k] >= m->cap) return bad(m, "decode_many index outside the device rows");
        } else if (a->n > m->cap) {
            return bad(m, "decode_many over more rows than the device holds");
        }
        nq += round4((size_t)a->g * a->d);
        nb += (size_t)a->n;
    }
    const size_t f = sizeof(float), in_bytes = (nq + nb) * f, idx_bytes = (nb ? nb : 1) * sizeof(int32_t);
    if (kbcuda::reserve(b->in, in_bytes, "batched decode inputs") ||
        kbcuda::reserve(b->idx, idx_bytes, "batched decode indices") ||
        kbcuda::reserve(b->out, nq * f, "batched decode outputs") || kbcuda::reserve_pinned(b->hin, in_bytes) ||
        kbcuda::reserve_pinned(b->hidx, idx_bytes) || kbcuda::reserve_pinned(b->hout, nq * f))
        return -1;
    float *hq = (float *)b->hin.p, *hb = hq + nq;
    int32_t *hi = (int32_t *)b->hidx.p;
    size_t oq = 0, ob = 0;
    for (int i = 0; i < n; i++) {   // pack (no bias is a bias of 0: the same bits)
        const kb_decode_args *a = &as[i];
        const size_t gd = (size_t)a->g * a->d;
        memcpy(hq + oq, a->q, gd * f);
        for (int k = 0; k < a->n; k++) {
            hi[ob + k] = a->idx ? a->idx[k] : k;
            hb[ob + k] = a->bias ? a->bias[k] : 0.0f;
        }
        oq += round4(gd);
        ob += (size_t)a->n;
    }
    CK(cudaMemcpy(b->in.p, hq, in_bytes, cudaMemcpyHostToDevice));
    if (nb) CK(cudaMemcpy(b->idx.p, hi, nb * sizeof(int32_t), cudaMemcpyHostToDevice));
    for (int i = 0; i < n; i++)
        if (ms[i]->async_pending) {   // rows put on the copy stream come first
            if (kb_cuda_copy_fence()) return -1;
            for (int k = 0; k < n; k++) ms[k]->async_pending = false;
            break;
        }
    const float *dq = (const float *)b->in.p, *db = dq + nq;
    const int32_t *di = (const int32_t *)b->idx.p;
    float *dout = (float *)b->out.p;
    oq = ob = 0;
    for (int i = 0; i < n; i++) {   // queued on the kernels' stream, no waiting
        const kb_decode_args *a = &as[i];
        kb_kvdev *m = ms[i];
        kb_decode_args da = {a->g, a->d, a->n, dq + oq, m->rows, m->rows ? vrow(m, 0) : nullptr,
                             di + ob, db + ob, dout + oq, nullptr, m->type};
        if (kb_cuda_decode_dev(&da)) return -1;
        oq += round4((size_t)a->g * a->d);
        ob += (size_t)a->n;
    }
    float *ho = (float *)b->hout.p;
    CK(cudaMemcpy(ho, dout, nq * f, cudaMemcpyDeviceToHost));   // waits for every kernel
    oq = 0;
    for (int i = 0; i < n; i++) {
        const size_t gd = (size_t)as[i].g * as[i].d;
        memcpy(as[i].out, ho + oq, gd * f);
        oq += round4(gd);
    }
    return 0;
}

}  // namespace

extern "C" kb_kvdev_batch *kb_kvdev_batch_new(void) {
    kb_kvdev_batch *b = new (std::nothrow) kb_kvdev_batch();
    if (!b) fprintf(stderr, "kb cuda kv rows: out of host memory\n");
    return b;
}

extern "C" void kb_kvdev_batch_free(kb_kvdev_batch *b) {
    if (!b) return;
    release(b->in);
    release(b->idx);
    release(b->out);
    for (kbcuda::HostBuf *h : {&b->hin, &b->hidx, &b->hout}) release(*h);
    delete b;
}

extern "C" size_t kb_kvdev_batch_bytes(const kb_kvdev_batch *b) {
    if (!b) return 0;
    size_t n = 0;
    for (const DevBuf *x : {&b->in, &b->idx, &b->out}) n += x->p ? x->cap : 0;
    return n;
}

extern "C" int kb_kvdev_decode_many(kb_kvdev_batch *b, kb_kvdev *const *ms, const kb_decode_args *as, int n) {
    if (n <= 0) return 0;
    if (!b || !ms || !as) {
        fprintf(stderr, "kb cuda kv rows: decode_many without its buffers, copies or args\n");
        return -1;
    }
    return decode_many(b, ms, as, n);
}

extern "C" int kb_kvdev_decode_subset(kb_kvdev *m, const void *K, const void *V, int host_n, int *valid,
                                      const kb_decode_args *a) {
    if (!a->idx || a->n < 0 || host_n < 0 || (host_n > 0 && (!K || !V)))
        return bad(m, "working-set decode without rows or indices");
    set_mode(m, kWorkingSet);
    if (place(m, K, V, host_n, *valid, a->idx, a->n)) {
        forget_slots(m);   // a failed upload leaves no slot claiming a row it may not hold
        return -1;
    }
    *valid = host_n;
    return decode_rows(m, a, m->slots.data());
}
