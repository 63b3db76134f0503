package retryvalkey

import (
	"strings"
	"sync"

	"github.com/valkey-io/valkey-go"
)

// kept holds what it takes to send a command again after valkey-go has
// recycled it (it does once the server answered): its words, flags and
// slot. It is pooled, so that keeping costs the success path no
// allocation.
type kept struct {
	words []string
	cmd   valkey.Completed // flags and slot; its words are valkey-go's
	call  call             // the call's state, when this is its first command
}

var keptPool = sync.Pool{New: func() any { return new(kept) }}

func keep(cmd *valkey.Completed) *kept {
	k := keptPool.Get().(*kept)
	k.words = append(k.words[:0], cmd.Commands()...)
	k.cmd = *cmd
	return k
}

func (k *kept) release() {
	clear(k.words)
	k.words = k.words[:0]
	k.cmd = valkey.Completed{}
	if cap(k.words) <= 1024 {
		keptPool.Put(k)
	}
}

func (k *kept) name() string {
	if len(k.words) > 0 {
		return k.words[0]
	}
	return ""
}

// Key-slot flags of valkey-go's commands (its cmds.InitSlot and
// cmds.NoSlot): a command with neither has the slot of a key.
const (
	initSlot = 1 << 14
	noSlot   = 1 << 15
)

// resendable reports whether build can make the command again: valkey-go's
// builder refuses an empty name and subscriptions, and a cluster command's
// slot must be that of one of its words.
func (k *kept) resendable() bool {
	if k.name() == "" || strings.HasSuffix(strings.ToUpper(k.name()), "SUBSCRIBE") {
		return false
	}
	_, ok := k.keyIndex()
	return ok
}

// keyIndex returns the index of a word whose slot is the command's, 0 when
// the command has no key slot, and false when no word has it.
func (k *kept) keyIndex() (int, bool) {
	ks := k.cmd.Slot()
	if ks&(initSlot|noSlot) != 0 {
		return 0, true
	}
	for i := 1; i < len(k.words); i++ {
		if c := k.cmd.SetSlot(k.words[i]); c.Slot() == ks {
			return i, true
		}
	}
	return 0, false
}

// build makes the command again from its words, with b (the client's
// builder), blocking and unblocked on cancel if it was, routed to the same
// slot, and not retryable: valkey-go's loop does not repeat it, so this
// client's loop counts every resend. Not being read-only either, a resend
// goes to a cluster's primary even when ClientOption.SendToReplicas would
// have sent the command to a replica. It must be resendable.
func (k *kept) build(b valkey.Builder) valkey.Completed {
	var c valkey.Completed
	if k.cmd.IsBlock() {
		c = b.Arbitrary(k.words...).Blocking()
	} else {
		c = b.Arbitrary(k.words...).Build()
	}
	if k.cmd.IsUnblockOnCancel() {
		c = c.UnblockOnCancel()
	}
	if i, _ := k.keyIndex(); i > 0 {
		c = c.SetSlot(k.words[i])
	}
	return c
}
