import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import org.apache.beam.model.pipeline.v1.RunnerApi;
import org.apache.beam.runners.fnexecution.wire.LengthPrefixUnknownCoders;
import org.apache.beam.sdk.coders.Coder;
import org.apache.beam.sdk.util.construction.RehydratedComponents;

/**
 * Transcode decodes values with the coders a Java runner builds from a pipeline's components
 * (unknown coders replaced by length-prefixed bytes, as the portable runners do) and encodes
 * them again, so a test can see what a Java runner hands the next stage.
 *
 * <p>Usage: {@code java Transcode <components.pb>}, then one request a line on standard input,
 * {@code <coder id> <value in hex>}; one answer a line on standard output, {@code OK <hex>
 * <value as Java prints it>} or {@code ERROR <why>}.
 */
public final class Transcode {
  private Transcode() {}

  public static void main(String[] args) throws Exception {
    RunnerApi.Components components =
        RunnerApi.Components.parseFrom(Files.readAllBytes(Paths.get(args[0])));
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    Map<String, Coder<Object>> coders = new HashMap<>();
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isEmpty()) {
        continue;
      }
      String[] fields = line.split(" ", 2);
      try {
        Coder<Object> coder = coders.get(fields[0]);
        if (coder == null) {
          coder = runnerCoder(components, fields[0]);
          coders.put(fields[0], coder);
        }
        ByteArrayInputStream value = new ByteArrayInputStream(fromHex(fields.length > 1 ? fields[1] : ""));
        Object decoded = coder.decode(value);
        if (value.available() != 0) {
          throw new IllegalStateException(value.available() + " bytes left after decoding with " + coder);
        }
        ByteArrayOutputStream encoded = new ByteArrayOutputStream();
        coder.encode(decoded, encoded);
        out.println("OK " + toHex(encoded.toByteArray()) + " " + String.valueOf(decoded).replace('\n', ' '));
      } catch (Exception e) {
        out.println("ERROR " + e.toString().replace('\n', ' '));
      }
    }
  }

  @SuppressWarnings("unchecked")
  private static Coder<Object> runnerCoder(RunnerApi.Components components, String id) throws Exception {
    RunnerApi.Components.Builder builder = components.toBuilder();
    String wireId = LengthPrefixUnknownCoders.addLengthPrefixedCoder(id, builder, true);
    return (Coder<Object>) RehydratedComponents.forComponents(builder.build()).getCoder(wireId);
  }

  private static byte[] fromHex(String s) {
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return b;
  }

  private static String toHex(byte[] b) {
    StringBuilder s = new StringBuilder(2 * b.length);
    for (byte x : b) {
      s.append(String.format("%02x", x));
    }
    return s.toString();
  }
}
