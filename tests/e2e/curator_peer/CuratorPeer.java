// A contender that takes ZooKeeper locks the way Apache Curator does, for the tests of lock's
// ZooKeeper backend: Curator's own InterProcessMutex and InterProcessSemaphoreV2, so that lock
// and Curator can be shown to exclude each other. tests/e2e/curator_peer.py compiles and runs it.
//
//   CuratorPeer <connect> mutex <path> <rounds> <hold_ms> <log_file>
//   CuratorPeer <connect> semaphore <path> <max_leases> <rounds> <hold_ms> <log_file>
//   CuratorPeer <connect> hold mutex <path>
//   CuratorPeer <connect> hold semaphore <path> <max_leases>
//
// Rounds: acquire, append "enter curator-<pid>" to the log, hold hold_ms, append
// "exit curator-<pid>", release; rounds times. The lines are those the shell children of the
// e2e tests write (harness.max_overlap reads them), each one write(2) to a file opened with
// O_APPEND, so logs of many contenders can be one file.
//
// Hold: acquire once, print "acquired <node path> 0x<session id> <negotiated session timeout ms>",
// then hold until stdin reaches its end or SIGTERM comes; release, print "released", exit 0.
//
// System properties: peer.sessionMs (requested session timeout, default 10000) and
// peer.connectMs (connection timeout, default 15000). Exit status 2 on bad usage, 1 on failure.

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;

public final class CuratorPeer {
    /** InterProcessMutex keeps the path of the node it holds to itself; this shows it. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String heldNode() {
            return getLockPath();
        }
    }

    /** One acquisition of either recipe. */
    interface Held {
        String node();

        void release() throws Exception;
    }

    private final CuratorFramework client;
    private final String kind;
    private final String path;
    private final int leases;
    private Mutex mutex;
    private InterProcessSemaphoreV2 semaphore;
    private Held held; // guarded by this

    private CuratorPeer(CuratorFramework client, String kind, String path, int leases) {
        this.client = client;
        this.kind = kind;
        this.path = path;
        this.leases = leases;
    }

    private Held acquire() throws Exception {
        if (kind.equals("mutex")) {
            if (mutex == null) {
                mutex = new Mutex(client, path);
            }
            mutex.acquire();
            String node = mutex.heldNode();
            return new Held() {
                public String node() {
                    return node;
                }

                public void release() throws Exception {
                    mutex.release();
                }
            };
        }
        if (semaphore == null) {
            semaphore = new InterProcessSemaphoreV2(client, path, leases);
        }
        Lease lease = semaphore.acquire();
        String node = ZKPaths.makePath(path, "leases", lease.getNodeName()); // it tells the name only
        return new Held() {
            public String node() {
                return node;
            }

            public void release() throws Exception {
                lease.close();
            }
        };
    }

    private synchronized void setHeld(Held h) {
        held = h;
    }

    /** Releases what is held, once, whoever calls first: the main thread or the SIGTERM hook. */
    private synchronized boolean releaseHeld() {
        if (held == null) {
            return false;
        }
        Held h = held;
        held = null;
        try {
            h.release();
        } catch (Exception e) {
            System.err.println("curator peer: release: " + e);
        }
        return true;
    }

    private void rounds(int rounds, long holdMs, String logFile) throws Exception {
        long pid = ProcessHandle.current().pid();
        byte[] enter = ("enter curator-" + pid + "\n").getBytes(StandardCharsets.US_ASCII);
        byte[] exit = ("exit curator-" + pid + "\n").getBytes(StandardCharsets.US_ASCII);
        try (FileOutputStream log = new FileOutputStream(logFile, true)) { // O_APPEND
            for (int i = 0; i < rounds; i++) {
                setHeld(acquire());
                log.write(enter);
                if (holdMs > 0) {
                    Thread.sleep(holdMs);
                }
                log.write(exit);
                releaseHeld();
            }
        }
    }

    private void hold() throws Exception {
        Held h = acquire();
        setHeld(h);
        System.out.printf("acquired %s 0x%x %d%n", h.node(),
                client.getZookeeperClient().getZooKeeper().getSessionId(),
                client.getZookeeperClient().getZooKeeper().getSessionTimeout());
        System.out.flush();
        while (System.in.read() >= 0) {
            // held until stdin ends
        }
        if (releaseHeld()) {
            System.out.println("released");
            System.out.flush();
        }
    }

    private static int usage() {
        System.err.println("usage: CuratorPeer <connect> mutex <path> <rounds> <hold_ms> <log_file>\n"
                + "       CuratorPeer <connect> semaphore <path> <max_leases> <rounds> <hold_ms> <log_file>\n"
                + "       CuratorPeer <connect> hold mutex <path>\n"
                + "       CuratorPeer <connect> hold semaphore <path> <max_leases>");
        return 2;
    }

    private static int run(String[] a) throws Exception {
        if (a.length < 3) {
            return usage();
        }
        boolean hold = a[1].equals("hold");
        int at = hold ? 2 : 1; // where the recipe's name is
        String kind = a[at];
        boolean sem = kind.equals("semaphore");
        if (!sem && !kind.equals("mutex")) {
            return usage();
        }
        int want = at + 2 + (sem ? 1 : 0) + (hold ? 0 : 3);
        if (a.length != want) {
            return usage();
        }
        String path = a[at + 1];
        int leases = sem ? Integer.parseInt(a[at + 2]) : 1;
        int rest = at + 2 + (sem ? 1 : 0);
        int rounds = hold ? 0 : Integer.parseInt(a[rest]);
        long holdMs = hold ? 0 : Long.parseLong(a[rest + 1]);

        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(a[0])
                .sessionTimeoutMs(Integer.getInteger("peer.sessionMs", 10000))
                .connectionTimeoutMs(Integer.getInteger("peer.connectMs", 15000))
                .retryPolicy(new ExponentialBackoffRetry(100, 10, 2000))
                .build();
        client.start();
        CuratorPeer peer = new CuratorPeer(client, kind, path, leases);
        // SIGTERM (or SIGINT): give back what is held, then end the session, which removes the
        // ephemeral nodes at once instead of when the session times out.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (peer.releaseHeld()) {
                System.out.println("released");
                System.out.flush();
            }
            client.close();
        }));
        if (hold) {
            peer.hold();
        } else {
            peer.rounds(rounds, holdMs, a[rest + 2]);
        }
        client.close();
        return 0;
    }

    public static void main(String[] args) {
        int status;
        try {
            status = run(args);
        } catch (NumberFormatException e) {
            System.err.println("curator peer: not a number: " + e.getMessage());
            status = usage();
        } catch (Exception e) {
            System.err.println("curator peer: " + e);
            status = 1;
        }
        System.exit(status);
    }
}
