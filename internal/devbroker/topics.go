package devbroker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Saving topic metadata before records are acknowledged.
//
// With a DataDir, kfake (v0.0.0-20260918054303) writes each record batch to
// its partition's segment file as it stores it, and rewrites topics.json when
// a CreateTopics, DeleteTopics, CreatePartitions or config request changes a
// topic, but not when a Metadata request auto-creates one (03_metadata.go
// creates it in memory only). An auto-created topic reached topics.json only
// at Close, so after a crash (kill -9, OOM kill, power loss) the restarted
// cluster did not know it and every record in its segment files was
// unreadable. kfake's atomic write of topics.json (temp file, fsync, rename)
// also leaves the rename itself to the file system's mercy: it does not fsync
// the directory.
//
// So every Produce request passes through a control before kfake handles it:
// a topic it names that topics.json does not hold yet, under its current
// topic ID, is added to topics.json (temp file, fsync, rename, fsync of the
// directory) before kfake stores and acknowledges the records. A crash then
// loses at most the requests in flight, and with SyncWrites nothing that was
// acknowledged.
//
// Why at Produce and not when the topic is created: kfake runs controls before
// it checks SASL, so a control that created topics on Metadata would let an
// unauthenticated connection create them. Saving a topic that already exists
// grants nothing, whoever sends the request. A topic auto-created by a client
// that never produces to it can still be lost in a crash; it holds no records.
//
// We write the file in kfake's format, keeping its own entries byte for byte
// and adding ours with the fields its loader reads (persist.go persistTopic).
// A topics.json of another format version is left alone and produce to the
// unsaved topic is refused (see topicsFileVersion). kfake writes topics.json on
// its own goroutine, which is parked while our control runs except for calls
// made through the Cluster's methods (Kfake().CreateTopic and the like) from
// other goroutines; such a call racing a first produce to a new topic could
// have its write replaced by ours, until the next change or Close rewrites
// the file.

// topicsFileVersion is the topics.json format version kfake writes and we
// know how to extend.
const topicsFileVersion = 1

// topicSaver keeps topics.json in step with the topics records are produced
// to.
type topicSaver struct {
	kf  *kfake.Cluster
	dir string
	log *slog.Logger // nil discards

	mu      sync.Mutex
	failing bool // the last save failed; logged once until one succeeds
	// saved holds the IDs of the topics known to be in topics.json, so
	// that produce requests to them cost no file read and no fsync. kfake
	// rewrites the file from its own topics, so an entry stays until its
	// topic is deleted, and a topic recreated under the name has a new ID.
	saved map[[16]byte]bool
}

// installTopicSaver must run right after kfake.NewCluster, before any client
// can produce.
func installTopicSaver(kf *kfake.Cluster, dir string, log *slog.Logger) {
	s := &topicSaver{kf: kf, dir: dir, log: log, saved: map[[16]byte]bool{}}
	kf.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		req, ok := kreq.(*kmsg.ProduceRequest)
		if !ok {
			return nil, nil, false
		}
		if err := s.beforeProduce(req); err != nil {
			return refuse(req, err)
		}
		return nil, nil, false
	})
}

// beforeProduce saves every topic req names that exists and is not saved yet.
func (s *topicSaver) beforeProduce(req *kmsg.ProduceRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var infos []*kfake.TopicInfo
	for _, t := range req.Topics {
		var info *kfake.TopicInfo
		if t.TopicID != [16]byte{} {
			info = s.kf.TopicIDInfo(t.TopicID)
		} else {
			info = s.kf.TopicInfo(t.Topic)
		}
		// A nil info is a topic kfake answers UNKNOWN_TOPIC_OR_PARTITION.
		if info != nil && !s.saved[info.TopicID] {
			infos = append(infos, info)
		}
	}
	if len(infos) == 0 {
		return nil
	}
	err := s.save(infos)
	if err == nil {
		for _, info := range infos {
			s.saved[info.TopicID] = true
		}
	}
	switch {
	case err != nil && !s.failing && s.log != nil:
		s.log.Error("devbroker: cannot save topic metadata; refusing produce requests until it works (check the data directory's free space and permissions)",
			"dir", s.dir, "error", err)
	case err == nil && s.failing && s.log != nil:
		s.log.Warn("devbroker: saving topic metadata works again", "dir", s.dir)
	}
	s.failing = err != nil
	return err
}

// savedTopic is the part of a topics.json entry we read, and all of one we
// write.
type savedTopic struct {
	Name       string            `json:"name"`
	ID         []byte            `json:"id"` // base64, as kfake's uuid.MarshalText
	Partitions int               `json:"partitions"`
	Replicas   int               `json:"replicas"`
	Configs    map[string]string `json:"configs,omitempty"`
}

type topicsFile struct {
	Version int               `json:"version"`
	Topics  []json.RawMessage `json:"topics"`
}

// save adds infos to topics.json where it lacks them. Once all are there it
// syncs the directory, also when kfake wrote the entries: its rename is then
// durable too.
func (s *topicSaver) save(infos []*kfake.TopicInfo) error {
	path := filepath.Join(s.dir, "topics.json")
	f := topicsFile{Version: topicsFileVersion}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading topics.json: %w", err)
	default:
		if err := json.Unmarshal(raw, &f); err != nil {
			return fmt.Errorf("reading topics.json: %w", err)
		}
		if f.Version != topicsFileVersion {
			return fmt.Errorf("topics.json has format version %d, this build of strait writes version %d", f.Version, topicsFileVersion)
		}
	}

	want := make(map[string]*kfake.TopicInfo, len(infos))
	for _, info := range infos {
		want[info.Topic] = info
	}
	kept := f.Topics[:0]
	for _, e := range f.Topics {
		var st savedTopic
		if err := json.Unmarshal(e, &st); err != nil {
			return fmt.Errorf("reading topics.json: %w", err)
		}
		if info, ok := want[st.Name]; ok {
			if len(st.ID) == len(info.TopicID) && [16]byte(st.ID) == info.TopicID {
				delete(want, st.Name) // saved already
			} else {
				continue // an earlier topic of that name
			}
		}
		kept = append(kept, e)
	}
	f.Topics = kept
	if len(want) > 0 {
		for _, info := range want {
			st := savedTopic{
				Name:       info.Topic,
				ID:         info.TopicID[:],
				Partitions: len(s.kf.PartitionInfos(info.Topic)),
				Replicas:   info.NumReplicas,
			}
			for k, v := range info.Configs {
				if v != nil {
					if st.Configs == nil {
						st.Configs = make(map[string]string)
					}
					st.Configs[k] = *v
				}
			}
			e, err := json.Marshal(st)
			if err != nil {
				return err
			}
			f.Topics = append(f.Topics, e)
		}
		data, err := json.Marshal(f)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(path, data); err != nil {
			return err
		}
	}
	return syncDir(s.dir)
}

// refuse answers req with KAFKA_STORAGE_ERROR (retriable) for every
// partition, as a broker does when it cannot write its log. An acks=0 request
// gets no answer from kfake, so kfake handles it: there was no promise to
// keep.
func refuse(req *kmsg.ProduceRequest, err error) (kmsg.Response, error, bool) {
	if req.Acks == 0 {
		return nil, nil, false
	}
	msg := "devbroker: saving topic metadata: " + err.Error()
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = kerr.KafkaStorageError.Code
			rp.ErrorMessage = &msg
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}

// writeFileAtomic replaces path with data so that a crash at any point leaves
// either the old file or the new one, and the new one survives a power loss
// once this returns. The temporary name ends in .tmp, which kfake removes on
// load if a crash left it behind.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".devbroker.tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// syncDir makes the renames and creations in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
