// Package phys is pooldriver's physical connection: one driver connection
// owned by the pool (Conn), the state pooldriver knows of its server
// session (ConnState), and the one function that decides its fate when
// something lets go of it (decide, tested over every input).
//
// What it promises:
//
//   - A connection goes back to the pool clean or not at all: a
//     transaction left open is rolled back, a session something changed is
//     reset (on the connection's next statement where the dialect can
//     carry it), and one in an unknown state is destroyed. Every such
//     choice is decide's, from ConnState.
//   - ConnState is written only by Conn's methods, under the lock rules
//     written at Conn's fields (mu, sem).
//   - It never reaches up into the Connector, a task or a transaction: it
//     is handed what it needs of them, once, in an Env (timeouts, what is
//     on, the stats it counts, the Owner it asks), and sees a task as a
//     TaskBinding, a *sql.Tx as a TaskClaim and a release tracer as a
//     ReleaseHook. The root package implements those; the compiler keeps
//     this package from naming anything of the root's.
//   - Rollbacks and resets it runs by itself are bounded by
//     Env.CleanupTimeout and run on a context no caller can cancel.
package phys
