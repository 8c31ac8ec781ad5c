// The `tezip` Python module: Reader and Stream over NumPy arrays. Pixels are handed to NumPy
// without a copy: the array owns the buffer the decoder filled.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "codecs/buffer_pool.hpp"
#include "format/errors.hpp"
#include "loader/chunk_store.hpp"
#include "loader/exchange.hpp"
#include "loader/reader.hpp"
#include "loader/stream.hpp"

namespace py = pybind11;
using namespace tezip;

namespace {

// (T, H, W[, C]) interleaved or (T, [C, ]H, W) planar, without T when `squeeze` drops T == 1.
py::array to_array(Clip&& clip, bool squeeze) {
  const auto& g = clip.geometry;
  const std::size_t element = clip.element_size();
  const bool planar = clip.layout == ClipLayout::Planar && g.channels > 1;
  std::vector<py::ssize_t> shape, strides;
  if (!squeeze) shape.push_back(py::ssize_t(clip.length));
  if (planar) shape.push_back(py::ssize_t(g.channels));
  shape.push_back(py::ssize_t(g.height));
  shape.push_back(py::ssize_t(g.width));
  if (g.channels > 1 && !planar) shape.push_back(py::ssize_t(g.channels));
  py::ssize_t stride = py::ssize_t(element);
  strides.resize(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  auto* owner = new ClipBytes(std::move(clip.data));
  py::capsule base(owner, [](void* p) { delete static_cast<ClipBytes*>(p); });
  if (element == 1) return py::array(py::dtype::of<std::uint8_t>(), shape, strides, owner->data(), base);
  return py::array(py::dtype::of<std::uint16_t>(), shape, strides, owner->data(), base);
}

struct PySample {
  py::array frames;
  std::size_t sequence, start, position;
  bool repeated;
};

Balance parse_balance(const std::string& name) {
  if (name == "repeat") return Balance::Repeat;
  if (name == "drop") return Balance::Drop;
  throw std::invalid_argument("balance must be 'repeat' or 'drop', not '" + name + "'");
}

std::optional<StreamState> parse_state(const py::object& state) {
  if (state.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(state)) return StreamState::parse(state.cast<std::string>());
  if (py::isinstance<py::dict>(state)) {
    const auto d = state.cast<py::dict>();
    if (d.contains("state")) return StreamState::parse(d["state"].cast<std::string>());
  }
  throw std::invalid_argument("state must be what Stream.state_dict() returned");
}

py::dict report_dict(const ExchangeReport& r) {
  py::dict d;
  d["bytes"] = r.bytes;
  d["new_bytes"] = r.new_bytes;
  d["blocks"] = r.blocks;
  d["new_blocks"] = r.new_blocks;
  return d;
}

py::dict stats_dict(const ExchangeStats& s) {
  py::dict d;
  d["epoch"] = s.epoch;
  d["sent_bytes"] = s.sent_bytes, d["sent_chunks"] = s.sent_chunks, d["sent_owned_chunks"] = s.sent_owned_chunks;
  d["received_bytes"] = s.received_bytes, d["received_chunks"] = s.received_chunks;
  d["staged_bytes"] = s.staged_bytes, d["staged_chunks"] = s.staged_chunks, d["dropped_chunks"] = s.dropped_chunks;
  d["seconds"] = s.seconds, d["waited_seconds"] = s.waited_seconds;
  return d;
}

// A rank's store and exchange live across the Streams of its epochs (one Stream per epoch), keyed
// by the store folder; tezip.finish_exchanges() (run at exit, before mpi4py finalises MPI) ends them.
struct StoreSession {
  std::shared_ptr<ChunkStore> store;
  std::shared_ptr<ChunkExchange> exchange;
  std::int64_t comm = 0;
};
std::mutex sessions_mutex;
std::map<std::string, StoreSession> sessions;

// `comm`: None, "world" (MPI initialised here), an int (a Fortran handle) or anything with py2f()
// (an mpi4py communicator; no mpi4py headers needed).
std::optional<std::int64_t> comm_handle(const py::object& comm) {
  if (comm.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(comm)) {
    if (comm.cast<std::string>() == "world") return ChunkExchange::kWorld;
    throw std::invalid_argument("comm must be an mpi4py communicator, a Fortran handle, \"world\" or None");
  }
  if (py::hasattr(comm, "py2f")) return comm.attr("py2f")().cast<std::int64_t>();
  return comm.cast<std::int64_t>();
}

StoreSession session_for(const std::string& dir, const std::string& source, std::optional<std::int64_t> comm,
                         std::uint64_t capacity, double timeout) {
  const auto key = std::filesystem::absolute(dir).lexically_normal().string();
  std::lock_guard lock(sessions_mutex);
  auto found = sessions.find(key);
  if (found != sessions.end()) {
    if (bool(found->second.exchange) != bool(comm) || (comm && *comm != found->second.comm))
      throw std::invalid_argument("the chunk store " + key + " is already used with another communicator");
    return found->second;
  }
  ChunkStoreOptions so;
  so.capacity = capacity;
  StoreSession s;
  s.store = std::make_shared<ChunkStore>(dir, source, so);
  if (comm) {
    ExchangeOptions eo;
    eo.timeout_s = timeout;
    s.exchange = std::make_shared<ChunkExchange>(s.store, *comm, eo);
    s.comm = *comm;
  }
  sessions[key] = s;
  return s;
}

}  // namespace

PYBIND11_MODULE(_tezip, m) {
  m.doc() = "Read tezip archives: random access (Reader) and sharded, shuffled training streams (Stream).";
  m.attr("__version__") = TEZIP_VERSION_STRING;
  py::register_exception<DataError>(m, "DataError", PyExc_ValueError);
  py::register_exception<InputError>(m, "InputError", PyExc_OSError);
  py::register_exception<ChunkMissing>(m, "ChunkMissing", PyExc_LookupError);
  py::register_exception<StoreFull>(m, "StoreFull", PyExc_OSError);
  py::register_exception<ExchangeError>(m, "ExchangeError", PyExc_RuntimeError);
  m.attr("built_with_mpi") = built_with_mpi();
  m.def("store_traffic", [](const std::string& dir) {
    const auto key = std::filesystem::absolute(dir).lexically_normal().string();
    std::shared_ptr<ChunkStore> store;
    {
      std::lock_guard lock(sessions_mutex);
      auto found = sessions.find(key);
      if (found != sessions.end()) store = found->second.store;
    }
    if (!store) store = std::make_shared<ChunkStore>(dir);
    const auto t = store->traffic();
    py::dict d;
    d["source_bytes"] = t.source_bytes, d["store_bytes"] = t.store_bytes, d["added_bytes"] = t.added_bytes;
    d["bytes_held"] = store->bytes_held(), d["chunks_held"] = store->held().size(), d["chunks"] = store->num_chunks();
    return d;
  }, py::arg("store"), "Compressed bytes this process read from the global file (source), out of the store, and added to it");
  m.def("finish_exchanges", [] {
    std::map<std::string, StoreSession> ending;
    {
      std::lock_guard lock(sessions_mutex);
      ending.swap(sessions);
    }
    py::gil_scoped_release release;
    for (auto& [key, s] : ending)
      if (s.exchange) s.exchange->finish();
    ending.clear();
  }, "Waits for the chunk exchanges running in the background and closes them (call before MPI_Finalize; run at exit)");

  m.def("buffer_pool_bytes", [] { return codecs::pooled_bytes(); },
        "Bytes of decoding buffers the process keeps for reuse (blocks freed by Readers and Streams)");
  m.def("release_buffers", [] { codecs::pooled_trim(); },
        "Gives the kept decoding buffers back to the system (after the data loading of a job is done); "
        "buffers in use are not affected");

  py::class_<Reader, std::shared_ptr<Reader>>(m, "Reader")
      .def(py::init([](const std::string& path, std::size_t cache_gops) {
             ReaderOptions o;
             o.cache_gops = cache_gops;
             return std::make_shared<Reader>(path, o);
           }),
           py::arg("path"), py::arg("cache_gops") = 16)
      .def_property_readonly("num_sequences", &Reader::num_sequences)
      .def("num_frames", &Reader::num_frames, py::arg("seq"))
      .def("sequence_name", &Reader::sequence_name, py::arg("seq"))
      .def("shape", [](const Reader& r, std::size_t seq) {
             const auto& g = r.geometry(seq);
             return g.channels > 1 ? py::make_tuple(g.height, g.width, g.channels) : py::make_tuple(g.height, g.width);
           }, py::arg("seq"), "Shape of one frame: (H, W) or (H, W, C)")
      .def("frame", [](const Reader& r, std::size_t seq, std::size_t t, bool channels_first) {
             Clip c;
             {
               py::gil_scoped_release release;
               c = r.frame(seq, t, channels_first ? ClipLayout::Planar : ClipLayout::Interleaved);
             }
             return to_array(std::move(c), true);
           }, py::arg("seq"), py::arg("t"), py::arg("channels_first") = false,
           "Frame t of sequence seq: (H, W) or (H, W, C), or (C, H, W) with channels_first; uint8 or uint16, channels\n"
           "as stored (BGR for images)")
      .def("clip", [](const Reader& r, std::size_t seq, std::size_t start, std::size_t length, bool channels_first) {
             Clip c;
             {
               py::gil_scoped_release release;
               c = r.clip(seq, start, length, channels_first ? ClipLayout::Planar : ClipLayout::Interleaved);
             }
             return to_array(std::move(c), false);
           }, py::arg("seq"), py::arg("start"), py::arg("length"), py::arg("channels_first") = false,
           "Frames start..start+length-1: (T, H, W[, C]), or (T, C, H, W) with channels_first");

  py::class_<PySample>(m, "Sample")
      .def_readonly("frames", &PySample::frames, "(T, H, W[, C]), or (T, C, H, W) from a channels_first Stream; uint8 or uint16")
      .def_readonly("sequence", &PySample::sequence)
      .def_readonly("start", &PySample::start)
      .def_readonly("position", &PySample::position)
      .def_readonly("repeated", &PySample::repeated, "a pad that repeats a sample of this epoch (equal counts per rank)")
      .def("__repr__", [](const PySample& s) {
        return "<tezip.Sample sequence=" + std::to_string(s.sequence) + " start=" + std::to_string(s.start) + ">";
      });

  py::class_<Stream>(m, "Stream")
      .def(py::init([](const std::string& path, std::size_t clip_len, std::size_t stride, std::optional<std::size_t> rank,
                       std::optional<std::size_t> world_size, std::uint64_t seed, std::uint64_t epoch, std::size_t shuffle_buffer,
                       double exchange, unsigned threads, std::size_t prefetch, const std::string& balance,
                       std::size_t cache_gops, const py::object& state, std::optional<std::uint64_t> position,
                       std::optional<std::string> store, const py::object& comm, std::optional<std::uint64_t> store_capacity,
                       double exchange_timeout, bool channels_first) {
             StreamOptions o;
             o.clip_len = clip_len, o.stride = stride;
             o.seed = seed, o.epoch = epoch, o.shuffle_buffer = shuffle_buffer, o.exchange = exchange;
             o.threads = threads, o.prefetch = prefetch, o.balance = parse_balance(balance);
             // Planar frames are the decoder's own: no interleave here, no permute in torch.
             o.layout = channels_first ? ClipLayout::Planar : ClipLayout::Interleaved, o.cache_gops = cache_gops;
             auto resume = parse_state(state);
             if (position && resume) throw std::invalid_argument("give state= or position=, not both");
             const auto handle = comm_handle(comm);
             if (handle && !store) throw std::invalid_argument("comm= needs store= (the folder of this rank's chunk store)");
             py::gil_scoped_release release;
             if (store) {
               // Over this rank's node-local store; with comm=, its chunks move between ranks over MPI.
               auto s = session_for(*store, path, handle, store_capacity.value_or(UINT64_MAX), exchange_timeout);
               o.rank = rank.value_or(s.exchange ? std::size_t(s.exchange->rank()) : 0);
               o.world_size = world_size.value_or(s.exchange ? std::size_t(s.exchange->size()) : 1);
               if (position) {
                 const Reader r(std::shared_ptr<const ChunkStore>(s.store));
                 resume = StreamState{o.epoch, *position, StreamPlan(r, o).fingerprint()};
               }
               return std::make_unique<Stream>(s.store, s.exchange, o, resume);
             }
             o.rank = rank.value_or(0), o.world_size = world_size.value_or(1);
             if (!position) return std::make_unique<Stream>(path, o, resume);
             // Start at `position` of epoch `epoch`: the state a stream of these options would have
             // saved there (tezip.torch resumes each DataLoader worker's stream this way).
             ReaderOptions r;
             r.cache_gops = o.cache_gops ? o.cache_gops : 2 * std::size_t(o.threads) + 4;
             auto reader = std::make_shared<const Reader>(path, r);
             resume = StreamState{o.epoch, *position, StreamPlan(*reader, o).fingerprint()};
             return std::make_unique<Stream>(std::move(reader), o, resume);
           }),
           py::arg("path"), py::arg("clip_len") = 1, py::arg("stride") = 1, py::arg("rank") = py::none(),
           py::arg("world_size") = py::none(), py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("shuffle_buffer") = 256,
           py::arg("exchange") = 1.0, py::arg("threads") = 2, py::arg("prefetch") = 8, py::arg("balance") = "repeat",
           py::arg("cache_gops") = 0, py::arg("state") = py::none(), py::arg("position") = py::none(),
           py::arg("store") = py::none(), py::arg("comm") = py::none(), py::arg("store_capacity") = py::none(),
           py::arg("exchange_timeout") = 300.0, py::arg("channels_first") = false,
           "channels_first: samples' frames as (T, C, H, W) instead of (T, H, W, C) (colour only).\n"
           "store: this rank's node-local chunk store folder (created for `path` when empty); epochs read only from it.\n"
           "comm: with store, the ranks exchange chunks over MPI each epoch: an mpi4py communicator, a Fortran handle, or\n"
           "'world' (MPI initialised here); rank and world_size default to the communicator's. Without comm, what a\n"
           "store lacks is staged from `path` (enough for exchange=0).")
      .def("__iter__", [](Stream& s) -> Stream& { return s; }, py::return_value_policy::reference_internal)
      .def("__next__", [](Stream& s) {
        std::optional<Sample> sample;
        {
          py::gil_scoped_release release;
          sample = s.next();
        }
        if (!sample) throw py::stop_iteration();
        const auto sequence = sample->sequence, start = sample->start, position = sample->position;
        const bool repeated = sample->repeated;
        return PySample{to_array(std::move(static_cast<Clip&>(*sample)), false), sequence, start, position, repeated};
      })
      .def("__len__", &Stream::size)
      .def_property_readonly("position", &Stream::position)
      .def_property_readonly("epoch", [](const Stream& s) { return s.options().epoch; })
      .def("state_dict", [](const Stream& s) {
        const auto st = s.state();
        py::dict d;
        d["epoch"] = st.epoch;
        d["position"] = st.position;
        d["state"] = st.serialize();
        return d;
      }, "Where the stream stands; Stream(..., state=that) resumes with exactly the samples not yet delivered")
      .def("store_stats", [](const Stream& s) { return stats_dict(s.store_stats()); },
           "With store=: what bringing the store to this epoch moved on this rank (compressed bytes sent, received over\n"
           "MPI and staged from the global file)")
      .def("exchange_report", [](const Stream& s) { return report_dict(s.exchange_report()); },
           "Per rank: bytes (compressed) of the blocks it reads this epoch, and of those it did not read the epoch before");
}
