// Package phys is pooldriver's physical connection: one driver connection
// owned by the pool (Conn), the state pooldriver knows of its server
// session (ConnState), the one function that decides its fate when
// something lets go of it (decide, tested over every input), and the rules
// under which the holds of a task share the connection bound to it
// (planShare, planShared, tested likewise; Conn.Join, Conn.Check).
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
//     asks its Connector, as an Owner, what it needs (once, for its Env:
//     timeouts, which hooks see it) and what to do (a hook's verdict, a
//     traced release; as functions Env.Init is handed, the BeforeAcquire
//     hook and what goes with a destroyed connection), and sees a task as a TaskBinding (a TaskBinder
//     while it binds a connection) and a *sql.Tx as a TaskClaim. The
//     root package implements those; the compiler keeps this package from
//     naming anything of the root's.
//   - Rollbacks and resets it runs by itself are bounded by
//     Owner.Policy's cleanup timeout and run on a context no caller can cancel.
package phys
