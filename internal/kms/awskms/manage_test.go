package awskms_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/straitgw/strait/internal/kms/awskms"
	"github.com/straitgw/strait/internal/kms/awskms/localkms"
)

// create makes a KEK and its HMAC key that the data path can use at once;
// rotate moves the alias to a new key while DEKs wrapped before still
// unwrap; list shows both.
func TestManage(t *testing.T) {
	s := localkms.Start(t)
	k := open(t, s)
	ctx := ctxT(t)
	made, err := k.CreateKEK(ctx, "alias/orders-kek", true)
	if err != nil || len(made) != 2 || made[1].Alias != "alias/orders-kek-hmac" || made[1].Usage != "GENERATE_VERIFY_MAC" {
		t.Fatalf("CreateKEK = %+v, %v", made, err)
	}
	if _, err := k.CreateKEK(ctx, "alias/orders-kek", false); !errors.Is(err, awskms.ErrAliasExists) {
		t.Errorf("create again: %v, want ErrAliasExists", err)
	}
	for _, bad := range []string{"orders-kek", "alias/aws/kms", "alias/has space"} {
		if _, err := k.CreateKEK(ctx, bad, false); err == nil {
			t.Errorf("CreateKEK(%q) succeeded", bad)
		}
	}
	dek := newDEK(t)
	w, err := k.Wrap(ctx, "alias/orders-kek", dek)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.DeriveKey(ctx, "alias/orders-kek", 0, []byte("l")); err != nil {
		t.Errorf("DeriveKey with the created HMAC key: %v", err)
	}
	old, next, err := k.RotateKEK(ctx, "alias/orders-kek")
	if err != nil || old.KeyID == next.KeyID || old.KeyID != made[0].KeyID {
		t.Fatalf("RotateKEK = %+v, %+v, %v", old, next, err)
	}
	if got, err := k.Unwrap(ctx, "alias/orders-kek", w); err != nil || !bytes.Equal(got, dek) {
		t.Errorf("a DEK wrapped before the rotation: %v", err)
	}
	if _, _, err := k.RotateKEK(ctx, "alias/missing-kek"); err == nil {
		t.Error("rotating a missing alias succeeded")
	}
	list, err := k.ListKEKs(ctx)
	if err != nil || len(list) != 2 || list[0].Alias != "alias/orders-kek" || list[0].KeyID != next.KeyID {
		t.Errorf("ListKEKs = %+v, %v", list, err)
	}
}
