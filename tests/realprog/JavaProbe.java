// realprog.java's program: the JDK's NIO and process spawning, unmodified,
// as a Java application uses them. Prints one line per check and exits 1 if
// any failed. Argument: "yes" or "no", whether libuepoll-interpose.so must
// be mapped into this JVM (read from /proc/self/maps).
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

public class JavaProbe {
  static boolean failed = false;

  static void step(String what, Object expected, Object actual) {
    boolean ok = expected.equals(actual);
    System.out.println(what + (ok ? " ok" : ": expected '" + expected + "', got '" + actual + "'"));
    if (!ok) failed = true;
  }

  public static void main(String[] args) throws Exception {
    String maps = Files.readString(Path.of("/proc/self/maps"));
    step("interposer loaded", args[0], maps.contains("libuepoll-interpose") ? "yes" : "no");

    // HttpServer and HttpClient: two selector threads and their pools.
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
    server.createContext("/", ex -> {
      byte[] b = ("hi " + ex.getRequestURI().getPath()).getBytes();
      ex.sendResponseHeaders(200, b.length);
      ex.getResponseBody().write(b);
      ex.close();
    });
    ExecutorService serverPool = Executors.newFixedThreadPool(4);
    ExecutorService clientPool = Executors.newFixedThreadPool(4);
    server.setExecutor(serverPool);
    server.start();
    int port = server.getAddress().getPort();
    HttpClient client = HttpClient.newBuilder().executor(clientPool).build();
    List<CompletableFuture<HttpResponse<String>>> replies = new ArrayList<>();
    for (int i = 0; i < 400; i++) {
      URI u = URI.create("http://127.0.0.1:" + port + "/r" + i);
      replies.add(client.sendAsync(HttpRequest.newBuilder(u).build(),
                                   HttpResponse.BodyHandlers.ofString()));
    }
    int answered = 0;
    for (int i = 0; i < replies.size(); i++) {
      if (replies.get(i).get(30, TimeUnit.SECONDS).body().equals("hi /r" + i)) answered++;
    }
    step("http, 400 requests", 400, answered);
    server.stop(0);

    // A selector woken by a pipe that another thread writes, then by
    // wakeup() from another thread.
    Selector sel = Selector.open();
    Pipe pipe = Pipe.open();
    pipe.source().configureBlocking(false);
    pipe.source().register(sel, SelectionKey.OP_READ);
    int bytes = 0;
    for (int i = 0; i < 500; i++) {
      Thread t = new Thread(() -> {
        try {
          pipe.sink().write(ByteBuffer.wrap(new byte[] {1}));
        } catch (IOException e) {
          e.printStackTrace();
        }
      });
      t.start();
      if (sel.select(10000) == 0) break;
      for (SelectionKey k : sel.selectedKeys()) {
        bytes += ((ReadableByteChannel) k.channel()).read(ByteBuffer.allocate(16));
      }
      sel.selectedKeys().clear();
      t.join();
    }
    step("selector, 500 pipe writes from other threads", 500, bytes);
    Thread waker = new Thread(sel::wakeup);
    long t0 = System.nanoTime();
    waker.start();
    sel.select(20000);
    waker.join();
    step("selector wakeup", true, System.nanoTime() - t0 < 10_000_000_000L);

    // Children with pipes on all three sides: cat echoes 16 KB back.
    int echoed = 0;
    for (int i = 0; i < 10; i++) {
      Process p = new ProcessBuilder("cat").start();
      byte[] msg = ("line " + i + "\n").repeat(2000).getBytes();
      Thread w = new Thread(() -> {
        try (OutputStream o = p.getOutputStream()) {
          o.write(msg);
        } catch (IOException e) {
          e.printStackTrace();
        }
      });
      w.start();
      byte[] got = p.getInputStream().readAllBytes();
      w.join();
      if (p.waitFor() == 0 && Arrays.equals(got, msg)) echoed++;
    }
    step("children echo through pipes", 10, echoed);
    Process q = new ProcessBuilder("sh", "-c", "echo err >&2; exit 3")
                    .redirectErrorStream(true).start();
    String out = new String(q.getInputStream().readAllBytes()).trim();
    step("child's stderr and exit status", "err 3", out + " " + q.waitFor());

    serverPool.shutdownNow();
    clientPool.shutdownNow();
    System.exit(failed ? 1 : 0);
  }
}
