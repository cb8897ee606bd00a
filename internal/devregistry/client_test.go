package devregistry_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/devregistry"
	"github.com/twmb/franz-go/pkg/sr"
)

// These tests drive the registry only through franz-go's sr client, a
// third-party client written against Confluent's registry.

func TestRegisterAndFetchThroughSRClient(t *testing.T) {
	ctx := context.Background()
	cl := client(t, start(t, devregistry.Options{}))

	id, err := cl.RegisterSchema(ctx, "users-value", sr.Schema{Schema: userV1}, -1, -1)
	if err != nil {
		t.Fatalf("RegisterSchema: %v", err)
	}
	if id != 1 {
		t.Errorf("first id: got %d, want 1", id)
	}

	// The same schema, formatted another way, is the same schema: same
	// id and no new version.
	again, err := cl.RegisterSchema(ctx, "users-value", sr.Schema{Schema: userV1Spaced}, -1, -1)
	if err != nil || again != id {
		t.Fatalf("re-registering: got id %d, %v; want %d", again, err, id)
	}
	if vs, err := cl.SubjectVersions(ctx, "users-value"); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("versions after re-registering: got %v, %v; want [1]", vs, err)
	}

	// Under another subject the same schema keeps its global id.
	other, err := cl.CreateSchema(ctx, "users-copy", sr.Schema{Schema: userV1})
	if err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	if other.ID != id || other.Version != 1 || other.Subject != "users-copy" {
		t.Errorf("CreateSchema: got id %d version %d subject %q, want %d 1 users-copy", other.ID, other.Version, other.Subject, id)
	}

	v2, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: userV2})
	if err != nil {
		t.Fatalf("registering a compatible second version: %v", err)
	}
	if v2.ID != 2 || v2.Version != 2 {
		t.Errorf("second version: got id %d version %d, want 2 and 2", v2.ID, v2.Version)
	}

	byID, err := cl.SchemaByID(ctx, id)
	if err != nil {
		t.Fatalf("SchemaByID: %v", err)
	}
	if byID.Schema != userV1 || byID.Type != sr.TypeAvro {
		t.Errorf("SchemaByID: got %+v, want the compact Avro schema", byID)
	}
	text, err := cl.SchemaTextByID(ctx, id)
	if err != nil || text != userV1 {
		t.Errorf("SchemaTextByID: got %q, %v", text, err)
	}

	latest, err := cl.SchemaByVersion(ctx, "users-value", -1)
	if err != nil {
		t.Fatalf("SchemaByVersion(latest): %v", err)
	}
	if latest.Version != 2 || latest.ID != 2 || latest.Schema.Schema != userV2 {
		t.Errorf("latest: got %+v", latest)
	}
	if text, err := cl.SchemaTextByVersion(ctx, "users-value", 1); err != nil || text != userV1 {
		t.Errorf("SchemaTextByVersion: got %q, %v", text, err)
	}

	subjects, err := cl.Subjects(ctx)
	if err != nil || !slices.Equal(subjects, []string{"users-copy", "users-value"}) {
		t.Errorf("Subjects: got %v, %v", subjects, err)
	}
	if ss, err := cl.SubjectsByID(ctx, id); err != nil || !slices.Equal(ss, []string{"users-copy", "users-value"}) {
		t.Errorf("SubjectsByID: got %v, %v", ss, err)
	}
	svs, err := cl.SchemaVersionsByID(ctx, id)
	want := []sr.SubjectVersion{{Subject: "users-copy", Version: 1}, {Subject: "users-value", Version: 1}}
	if err != nil || !slices.Equal(svs, want) {
		t.Errorf("SchemaVersionsByID: got %v, %v; want %v", svs, err, want)
	}

	found, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: userV1Spaced})
	if err != nil || found.ID != id || found.Version != 1 {
		t.Errorf("LookupSchema: got %+v, %v", found, err)
	}

	types, err := cl.SupportedTypes(ctx)
	if err != nil || !slices.Equal(types, []sr.SchemaType{sr.TypeAvro, sr.TypeProtobuf, sr.TypeJSON}) {
		t.Errorf("SupportedTypes: got %v, %v", types, err)
	}

	all, err := cl.AllSchemas(ctx)
	if err != nil || len(all) != 3 {
		t.Errorf("AllSchemas: got %d schemas, %v; want 3", len(all), err)
	}
}

func TestSchemaTypesThroughSRClient(t *testing.T) {
	ctx := context.Background()
	cl := client(t, start(t, devregistry.Options{}))

	for _, tc := range []struct {
		name string
		s    sr.Schema
	}{
		{"json", sr.Schema{Schema: jsonSchema, Type: sr.TypeJSON}},
		{"protobuf", sr.Schema{Schema: protoSchema, Type: sr.TypeProtobuf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, err := cl.CreateSchema(ctx, tc.name+"-value", tc.s)
			if err != nil {
				t.Fatalf("CreateSchema: %v", err)
			}
			got, err := cl.SchemaByID(ctx, ss.ID)
			if err != nil {
				t.Fatalf("SchemaByID: %v", err)
			}
			if got.Type != tc.s.Type {
				t.Errorf("type: got %v, want %v", got.Type, tc.s.Type)
			}
			if tc.s.Type == sr.TypeProtobuf && got.Schema != tc.s.Schema {
				t.Errorf("protobuf text changed: got %q", got.Schema)
			}
		})
	}
}

func TestErrorCodesThroughSRClient(t *testing.T) {
	ctx := context.Background()
	cl := client(t, start(t, devregistry.Options{}))
	if _, err := cl.RegisterSchema(ctx, "s", sr.Schema{Schema: userV1}, -1, -1); err != nil {
		t.Fatal(err)
	}

	_, err := cl.SchemaByVersion(ctx, "nope", 1)
	wantCode(t, err, 40401)
	var re *sr.ResponseError
	if errors.As(err, &re) && re.SchemaError() != sr.ErrSubjectNotFound {
		t.Errorf("sr maps 40401 to %v, want ErrSubjectNotFound", re.SchemaError())
	}
	_, err = cl.SchemaByVersion(ctx, "s", 7)
	wantCode(t, err, 40402)
	_, err = cl.SchemaByID(ctx, 99)
	wantCode(t, err, 40403)
	_, err = cl.LookupSchema(ctx, "s", sr.Schema{Schema: userV2})
	wantCode(t, err, 40403)
	_, err = cl.LookupSchema(ctx, "nope", sr.Schema{Schema: userV1})
	wantCode(t, err, 40401)
	_, err = cl.SubjectVersions(ctx, "nope")
	wantCode(t, err, 40401)

	for _, bad := range []sr.Schema{
		{Schema: `{"type":"record","name":"X"}`},                            // Avro record without fields
		{Schema: `{"type":"recrod","name":"X","fields":[]}`},                // unknown Avro type
		{Schema: `not json`},                                                // Avro is JSON
		{Schema: `{"type":`, Type: sr.TypeJSON},                             // broken JSON
		{Schema: `[1,2]`, Type: sr.TypeJSON},                                // not a schema
		{Schema: `{"type":"object"}`, Type: sr.TypeProtobuf},                // JSON sent as Protobuf
		{Schema: "syntax = \"proto3\"; message A {", Type: sr.TypeProtobuf}, // unclosed
		{Schema: "   "},
	} {
		_, err := cl.RegisterSchema(ctx, "bad", bad, -1, -1)
		wantCode(t, err, 42201)
	}
	if subjects, _ := cl.Subjects(ctx); slices.Contains(subjects, "bad") {
		t.Error("a refused registration created its subject")
	}

	_, err = cl.RegisterSchema(ctx, "s", sr.Schema{Schema: userNoDefault}, -1, -1)
	wantCode(t, err, 409)
	if !strings.Contains(err.Error(), "email") {
		t.Errorf("the incompatibility message %q does not name the field", err)
	}
}

func TestCompatibilityThroughSRClient(t *testing.T) {
	ctx := context.Background()
	cl := client(t, start(t, devregistry.Options{}))

	global := cl.Compatibility(ctx)
	if global[0].Err != nil || global[0].Level != sr.CompatBackward {
		t.Fatalf("default global level: got %v, %v; want BACKWARD", global[0].Level, global[0].Err)
	}
	res := cl.Compatibility(ctx, "s")
	wantCode(t, res[0].Err, 40408)
	res = cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), "s")
	if res[0].Err != nil || res[0].Level != sr.CompatBackward {
		t.Errorf("defaultToGlobal: got %v, %v", res[0].Level, res[0].Err)
	}

	if _, err := cl.RegisterSchema(ctx, "s", sr.Schema{Schema: userV1}, -1, -1); err != nil {
		t.Fatal(err)
	}
	check, err := cl.CheckCompatibility(ctx, "s", -1, sr.Schema{Schema: userNoDefault})
	if err != nil || check.Is {
		t.Errorf("check of an incompatible schema: got %+v, %v", check, err)
	}
	check, err = cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), "s", -2, sr.Schema{Schema: userNoDefault})
	if err != nil || check.Is || len(check.Messages) == 0 {
		t.Errorf("verbose check against all versions: got %+v, %v", check, err)
	}
	check, err = cl.CheckCompatibility(ctx, "s", 1, sr.Schema{Schema: userV2})
	if err != nil || !check.Is {
		t.Errorf("check of a compatible schema: got %+v, %v", check, err)
	}
	_, err = cl.CheckCompatibility(ctx, "s", 5, sr.Schema{Schema: userV2})
	wantCode(t, err, 40402)
	_, err = cl.CheckCompatibility(ctx, "nope", -1, sr.Schema{Schema: userV2})
	wantCode(t, err, 40401)
	if check, err := cl.CheckCompatibility(ctx, "nope", -2, sr.Schema{Schema: userV2}); err != nil || !check.Is {
		t.Errorf("a schema is compatible with a subject that has none: got %+v, %v", check, err)
	}

	set := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "s")
	if set[0].Err != nil || set[0].Level != sr.CompatNone {
		t.Fatalf("SetCompatibility: got %v, %v", set[0].Level, set[0].Err)
	}
	if res := cl.Compatibility(ctx, "s"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Errorf("subject level after setting it: got %v, %v", res[0].Level, res[0].Err)
	}
	if _, err := cl.RegisterSchema(ctx, "s", sr.Schema{Schema: userNoDefault}, -1, -1); err != nil {
		t.Errorf("NONE still refused an incompatible schema: %v", err)
	}
	if res := cl.ResetCompatibility(ctx, "s"); res[0].Err != nil {
		t.Errorf("ResetCompatibility: %v", res[0].Err)
	}
	wantCode(t, cl.Compatibility(ctx, "s")[0].Err, 40408)
	wantCode(t, cl.ResetCompatibility(ctx, "s")[0].Err, 40401)

	// FORWARD: the old schema must read the new one's data, so dropping a
	// field the old schema needs without a default is refused.
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatForward}, "f"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if _, err := cl.RegisterSchema(ctx, "f", sr.Schema{Schema: userNoDefault}, -1, -1); err != nil {
		t.Fatal(err)
	}
	_, err = cl.RegisterSchema(ctx, "f", sr.Schema{Schema: userV1}, -1, -1)
	wantCode(t, err, 409)

	// A change of type is incompatible under any level but NONE.
	_, err = cl.RegisterSchema(ctx, "f", sr.Schema{Schema: jsonSchema, Type: sr.TypeJSON}, -1, -1)
	wantCode(t, err, 409)

	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFullTransitive}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if global := cl.Compatibility(ctx); global[0].Level != sr.CompatFullTransitive {
		t.Errorf("global level: got %v, want FULL_TRANSITIVE", global[0].Level)
	}
}

func TestDeletesThroughSRClient(t *testing.T) {
	ctx := context.Background()
	cl := client(t, start(t, devregistry.Options{}))
	for _, s := range []string{userV1, userV2} {
		if _, err := cl.RegisterSchema(ctx, "s", sr.Schema{Schema: s}, -1, -1); err != nil {
			t.Fatal(err)
		}
	}

	// A soft-deleted version is gone from listings but its id still
	// decodes data.
	if err := cl.DeleteSchema(ctx, "s", 2, sr.SoftDelete); err != nil {
		t.Fatalf("soft-deleting version 2: %v", err)
	}
	if vs, _ := cl.SubjectVersions(ctx, "s"); !slices.Equal(vs, []int{1}) {
		t.Errorf("versions after the soft delete: got %v, want [1]", vs)
	}
	if vs, _ := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), "s"); !slices.Equal(vs, []int{1, 2}) {
		t.Errorf("versions with deleted=true: got %v, want [1 2]", vs)
	}
	_, err := cl.SchemaByVersion(ctx, "s", 2)
	wantCode(t, err, 40402)
	if _, err := cl.SchemaByID(ctx, 2); err != nil {
		t.Errorf("a soft-deleted version's id no longer resolves: %v", err)
	}
	wantCode(t, cl.DeleteSchema(ctx, "s", 2, sr.SoftDelete), 40406)
	wantCode(t, cl.DeleteSchema(ctx, "s", 1, sr.HardDelete), 40407)

	// Registering the soft-deleted schema again makes a new version with
	// the same id.
	ss, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: userV2})
	if err != nil || ss.ID != 2 || ss.Version != 3 {
		t.Errorf("re-registering a soft-deleted schema: got id %d version %d, %v; want id 2 version 3", ss.ID, ss.Version, err)
	}

	deleted, err := cl.DeleteSubject(ctx, "s", sr.SoftDelete)
	if err != nil || !slices.Equal(deleted, []int{1, 3}) {
		t.Errorf("soft-deleting the subject: got %v, %v; want [1 3]", deleted, err)
	}
	_, err = cl.DeleteSubject(ctx, "s", sr.SoftDelete)
	wantCode(t, err, 40404)
	if subjects, _ := cl.Subjects(ctx); len(subjects) != 0 {
		t.Errorf("subjects after a soft delete: got %v, want none", subjects)
	}
	if subjects, _ := cl.Subjects(sr.WithParams(ctx, sr.ShowDeleted)); !slices.Equal(subjects, []string{"s"}) {
		t.Errorf("subjects with deleted=true: got %v, want [s]", subjects)
	}

	deleted, err = cl.DeleteSubject(ctx, "s", sr.HardDelete)
	if err != nil || !slices.Equal(deleted, []int{1, 2, 3}) {
		t.Errorf("hard-deleting the subject: got %v, %v; want [1 2 3]", deleted, err)
	}
	_, err = cl.SchemaByID(ctx, 1)
	wantCode(t, err, 40403)
	_, err = cl.DeleteSubject(ctx, "s", sr.SoftDelete)
	wantCode(t, err, 40401)

	// Ids are never reused: the same schema comes back with a new one,
	// and the subject starts again at version 1.
	ss, err = cl.CreateSchema(ctx, "s", sr.Schema{Schema: userV1})
	if err != nil || ss.ID != 3 || ss.Version != 1 {
		t.Errorf("registering after a hard delete: got id %d version %d, %v; want id 3 version 1", ss.ID, ss.Version, err)
	}
	_, err = cl.DeleteSubject(ctx, "s", sr.HardDelete)
	wantCode(t, err, 40405)
}

func TestReferencesThroughSRClient(t *testing.T) {
	ctx := context.Background()
	cl := client(t, start(t, devregistry.Options{}))

	const address = `{"type":"record","name":"Address","namespace":"com.example","fields":[{"name":"city","type":"string"}]}`
	const customer = `{"type":"record","name":"Customer","namespace":"com.example","fields":[{"name":"address","type":"com.example.Address"}]}`
	addr, err := cl.CreateSchema(ctx, "address", sr.Schema{Schema: address})
	if err != nil {
		t.Fatal(err)
	}

	// Without the reference, the named type is unknown.
	_, err = cl.RegisterSchema(ctx, "customer", sr.Schema{Schema: customer}, -1, -1)
	wantCode(t, err, 42201)
	_, err = cl.RegisterSchema(ctx, "customer", sr.Schema{Schema: customer, References: []sr.SchemaReference{
		{Name: "com.example.Address", Subject: "address", Version: 9},
	}}, -1, -1)
	wantCode(t, err, 42201)

	refs := []sr.SchemaReference{{Name: "com.example.Address", Subject: "address", Version: 1}}
	cust, err := cl.CreateSchema(ctx, "customer", sr.Schema{Schema: customer, References: refs})
	if err != nil {
		t.Fatalf("registering with a reference: %v", err)
	}
	got, err := cl.SchemaByID(ctx, cust.ID)
	if err != nil || !slices.Equal(got.References, refs) {
		t.Errorf("references by id: got %v, %v; want %v", got.References, err, refs)
	}
	users, err := cl.SchemaReferences(ctx, "address", addr.Version)
	if err != nil || len(users) != 1 || users[0].ID != cust.ID {
		t.Errorf("SchemaReferences: got %+v, %v", users, err)
	}

	// A referenced version cannot be deleted while a live schema uses it.
	wantCode(t, cl.DeleteSchema(ctx, "address", 1, sr.SoftDelete), 42206)
	if _, err := cl.DeleteSubject(ctx, "customer", sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSchema(ctx, "address", 1, sr.SoftDelete); err != nil {
		t.Errorf("deleting a version no live schema references: %v", err)
	}
	// Soft-deleted versions still hold their references.
	wantCode(t, cl.DeleteSchema(ctx, "address", 1, sr.HardDelete), 42206)

	// Protobuf imports are references by file name.
	const common = "syntax = \"proto3\";\npackage common;\nmessage Money { int64 cents = 1; }\n"
	const order = "syntax = \"proto3\";\nimport \"common.proto\";\nmessage Order { common.Money total = 1; }\n"
	if _, err := cl.CreateSchema(ctx, "common", sr.Schema{Schema: common, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common", Version: 1}}}); err != nil {
		t.Errorf("registering a Protobuf schema with an import: %v", err)
	}
}
