package recordbatch

import (
	"errors"
	"fmt"
)

// Limits are the decompression settings a filter that reads compressed
// batches offers in its config, under the same keys in every filter.
type Limits struct {
	// MaxBatchBytes bounds what one compressed record batch may
	// decompress to, against decompression bombs. Default 64 MiB.
	MaxBatchBytes int `yaml:"max_batch_bytes"`
	// MaxCompressionRatio bounds how many times its compressed size a
	// batch may decompress to; any batch may reach 1 MiB. Default 100.
	MaxCompressionRatio int `yaml:"max_compression_ratio"`
	// DecompressionBudget bounds the bytes that the batches being
	// processed hold decompressed at once, across every connection and
	// every filter of the gateway: one budget per process, the largest
	// any filter sets. A batch that cannot get its share waits, then is
	// refused with a retriable error. Default 256 MiB.
	DecompressionBudget int `yaml:"decompression_budget"`
}

// Defaults of Limits.
const (
	DefaultMaxBatchBytes = 64 << 20
	// DefaultMaxCompressionRatio is above what real data reaches in a
	// batch of over 1 MiB (text and JSON compress 3 to 20 times), and
	// far below a bomb's hundreds or thousands.
	DefaultMaxCompressionRatio = 100
	// DefaultDecompressionBudget has room for three batches of the
	// default max_batch_bytes decompressing at once, decoders included;
	// real batches are far smaller, so many more fit.
	DefaultDecompressionBudget = 256 << 20
)

// WithDefaults returns l with every unset field at its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxBatchBytes == 0 {
		l.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if l.MaxCompressionRatio == 0 {
		l.MaxCompressionRatio = DefaultMaxCompressionRatio
	}
	if l.DecompressionBudget == 0 {
		l.DecompressionBudget = DefaultDecompressionBudget
	}
	return l
}

// Validate reports every problem of the settings at once, each naming its
// key and how to fix it.
func (l Limits) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case l.MaxBatchBytes < 0:
		bad("max_batch_bytes: %d is negative: use a size in bytes, such as 67108864 (64 MiB, the default)", l.MaxBatchBytes)
	case l.MaxBatchBytes > 0 && l.MaxBatchBytes < 1<<20:
		bad("max_batch_bytes: %d is under 1 MiB, less than a single default-sized batch: raise it", l.MaxBatchBytes)
	}
	if l.MaxCompressionRatio < 0 || l.MaxCompressionRatio == 1 {
		bad("max_compression_ratio: %d is not a usable ratio: use 2 or more (100 is the default); a batch may always decompress to 1 MiB", l.MaxCompressionRatio)
	}
	batch := l.MaxBatchBytes
	if batch <= 0 {
		batch = DefaultMaxBatchBytes
	}
	switch {
	case l.DecompressionBudget < 0:
		bad("decompression_budget: %d is negative: use a size in bytes, such as 268435456 (256 MiB, the default)", l.DecompressionBudget)
	case l.DecompressionBudget > 0 && l.DecompressionBudget < batch+MaxDecoderState:
		bad("decompression_budget: %d is less than max_batch_bytes (%d) plus 8 MiB for a decoder: a batch that large could never be decompressed; raise it to at least %d, or lower max_batch_bytes",
			l.DecompressionBudget, batch, batch+MaxDecoderState)
	}
	return errors.Join(errs...)
}

// Codecs returns codecs bounded by l (defaults filled in), drawing on the
// process's budget, which grows to l's if it is smaller.
func (l Limits) Codecs() *Codecs {
	l = l.WithDefaults()
	return NewCodecs(l.MaxBatchBytes, l.MaxCompressionRatio, ProcessBudget(l.DecompressionBudget), BudgetWait)
}
