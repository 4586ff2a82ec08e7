package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sandgate/store"
	"sandgate/store/bolt"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "sandgate-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()

	s, err := bolt.Open(filepath.Join(dir, "state.db"), bolt.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = s.Close() }()

	ctx := context.Background()
	errFull := errors.New("node full")
	atMostOne := func(f store.ReserveFacts) error {
		if f.Node.Sandboxes >= 1 {
			return errFull
		}
		return nil
	}
	rec := store.Sandbox{ID: "k7x2", Node: "w1", Principal: "agent-1", State: store.StateStarting, CPUMHz: 500, MemoryMB: 512}
	fmt.Println(s.Reserve(ctx, rec, atMostOne))

	rec.ID = "m3q9"
	err = s.Reserve(ctx, rec, atMostOne)
	fmt.Println(errors.Is(err, errFull))

	use, _ := s.NodeUsage(ctx, "w1")
	fmt.Printf("%+v\n", use)

	ended, _ := s.Update(ctx, "k7x2", func(r *store.Sandbox) error {
		r.State, r.EndReason = store.StateEnded, "destroyed"
		return nil
	})
	use, _ = s.NodeUsage(ctx, "w1")
	fmt.Println(ended.State, use.Sandboxes)
	// Output:
	// <nil>
	// true
	// {Sandboxes:1 CPUMHz:500 MemoryMB:512}
	// ended 0
}

func ExampleStore_ListPage() {
	dir, err := os.MkdirTemp("", "sandgate-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	s, err := bolt.Open(filepath.Join(dir, "state.db"), bolt.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = s.Close() }()

	ctx := context.Background()
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		rec := store.Sandbox{ID: id, Node: "w1", Principal: "agent:alice", State: store.StateRunning}
		if err := s.Reserve(ctx, rec, nil); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Follow Next until it is empty; the filters go with every page.
	q := store.Query{Principal: "agent:alice", Limit: 2}
	for {
		page, err := s.ListPage(ctx, q)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, r := range page.Items {
			fmt.Print(r.ID, " ")
		}
		fmt.Println("| more:", page.Next != "")
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	// Output:
	// a1 a2 | more: true
	// a3 a4 | more: true
	// a5 | more: false
}
