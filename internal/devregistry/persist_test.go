package devregistry_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/straitgw/strait/internal/devregistry"
	"github.com/twmb/franz-go/pkg/sr"
)

func TestStateSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "registry") // created by the registry
	s := start(t, devregistry.Options{DataDir: dir})
	cl := client(t, s)
	for _, sch := range []string{userV1, userV2} {
		if _, err := cl.RegisterSchema(ctx, "users-value", sr.Schema{Schema: sch}, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.RegisterSchema(ctx, "orders-value", sr.Schema{Schema: protoSchema, Type: sr.TypeProtobuf}, -1, -1); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSchema(ctx, "users-value", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, "orders-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = start(t, devregistry.Options{DataDir: dir})
	cl = client(t, s)
	if vs, err := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), "users-value"); err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Errorf("versions after restart: got %v, %v", vs, err)
	}
	if vs, _ := cl.SubjectVersions(ctx, "users-value"); !slices.Equal(vs, []int{2}) {
		t.Errorf("the soft delete did not survive: live versions %v", vs)
	}
	if got, err := cl.SchemaByID(ctx, 3); err != nil || got.Type != sr.TypeProtobuf || got.Schema != protoSchema {
		t.Errorf("schema 3 after restart: got %+v, %v", got, err)
	}
	if res := cl.Compatibility(ctx, "orders-value"); res[0].Level != sr.CompatFull {
		t.Errorf("subject level after restart: got %v", res[0].Level)
	}
	if res := cl.Compatibility(ctx); res[0].Level != sr.CompatNone {
		t.Errorf("global level after restart: got %v", res[0].Level)
	}
	// Ids continue where they stopped; known schemas keep theirs.
	if id, err := cl.RegisterSchema(ctx, "users-value", sr.Schema{Schema: userV1}, -1, -1); err != nil || id != 1 {
		t.Errorf("re-registering a known schema: got id %d, %v; want 1", id, err)
	}
	if id, err := cl.RegisterSchema(ctx, "new", sr.Schema{Schema: `"string"`}, -1, -1); err != nil || id != 4 {
		t.Errorf("a new schema after restart: got id %d, %v; want 4", id, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestADamagedStateFileIsRefused(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":       "{",
		"other format":   `{"format":2,"next_id":1,"compatibility":"BACKWARD"}`,
		"dangling id":    `{"format":1,"next_id":2,"compatibility":"BACKWARD","schemas":[],"subjects":{"s":[{"version":1,"id":1}]}}`,
		"id past next":   `{"format":1,"next_id":1,"compatibility":"BACKWARD","schemas":[{"id":1,"schemaType":"AVRO","schema":"\"int\""}]}`,
		"bad level":      `{"format":1,"next_id":1,"compatibility":"SOMETIMES"}`,
		"versions order": `{"format":1,"next_id":2,"compatibility":"BACKWARD","schemas":[{"id":1,"schemaType":"AVRO","schema":"\"int\""}],"subjects":{"s":[{"version":2,"id":1},{"version":1,"id":1}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "registry.json"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := devregistry.New(devregistry.Options{DataDir: dir})
			if err == nil || !strings.Contains(err.Error(), "registry.json") {
				t.Errorf("got %v, want an error naming the file", err)
			}
		})
	}
}

func TestAFailedWriteChangesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := start(t, devregistry.Options{DataDir: dir})
	cl := client(t, s)
	if _, err := cl.RegisterSchema(ctx, "s", sr.Schema{Schema: userV1}, -1, -1); err != nil {
		t.Fatal(err)
	}
	// Put a file where the directory was: every write now fails, even
	// as root.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := cl.RegisterSchema(ctx, "s", sr.Schema{Schema: userV2}, -1, -1)
	wantCode(t, err, 50001)
	if vs, _ := cl.SubjectVersions(ctx, "s"); !slices.Equal(vs, []int{1}) {
		t.Errorf("versions after a failed write: got %v, want [1]", vs)
	}
	if _, err := cl.SchemaByID(ctx, 2); err == nil {
		t.Error("the schema of a failed write is readable")
	}
}

func TestConcurrentRegistrations(t *testing.T) {
	ctx := context.Background()
	s := start(t, devregistry.Options{DataDir: t.TempDir()})
	cl := client(t, s)

	// Each worker registers the shared schema and its own schemas under
	// every subject: the shared one must end with one id everywhere, each
	// own schema with its own id, and versions must count up without
	// gaps.
	const workers, subjects = 8, 4
	shared := `{"type":"record","name":"Shared","fields":[{"name":"a","type":"int"}]}`
	own := func(w int) string {
		return fmt.Sprintf(`{"type":"record","name":"Own%d","fields":[{"name":"a","type":"int"}]}`, w)
	}
	// Records of different names are not compatible with each other.
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	sharedIDs := make([][]int, workers)
	ownIDs := make([][]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sub := range subjects {
				subject := fmt.Sprintf("subject-%d", sub)
				id, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: shared}, -1, -1)
				if err != nil {
					t.Errorf("worker %d shared: %v", w, err)
					return
				}
				sharedIDs[w] = append(sharedIDs[w], id)
				id, err = cl.RegisterSchema(ctx, subject, sr.Schema{Schema: own(w)}, -1, -1)
				if err != nil {
					t.Errorf("worker %d own: %v", w, err)
					return
				}
				ownIDs[w] = append(ownIDs[w], id)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	seen := map[int]int{} // id -> worker that owns it
	for w := range workers {
		for _, id := range sharedIDs[w] {
			if id != sharedIDs[0][0] {
				t.Errorf("the shared schema got ids %d and %d", sharedIDs[0][0], id)
			}
		}
		for _, id := range ownIDs[w] {
			if id != ownIDs[w][0] {
				t.Errorf("worker %d's schema got ids %d and %d", w, ownIDs[w][0], id)
			}
		}
		if prev, dup := seen[ownIDs[w][0]]; dup || ownIDs[w][0] == sharedIDs[0][0] {
			t.Errorf("worker %d's schema shares id %d with worker %d or the shared schema", w, ownIDs[w][0], prev)
		}
		seen[ownIDs[w][0]] = w
	}
	for sub := range subjects {
		vs, err := cl.SubjectVersions(ctx, fmt.Sprintf("subject-%d", sub))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int, workers+1)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(vs, want) {
			t.Errorf("subject-%d versions: got %v, want %v", sub, vs, want)
		}
	}
}
