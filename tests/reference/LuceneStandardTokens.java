// The tokens of Lucene's StandardAnalyzer (ElasticSearch's default `standard` analyzer: StandardTokenizer,
// LowerCaseFilter, no stop words) for each NUL-separated text on stdin; one NUL-terminated line of
// \u0001-separated tokens per text on stdout. Compiled and run by lucene_standard_analyzer.py against
// Debian's liblucene8-java (Lucene 8.7.0; ElasticSearch 7.x ships Lucene 8).
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;

public class LuceneStandardTokens {
  public static void main(String[] args) throws Exception {
    String input = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
    StandardAnalyzer analyzer = new StandardAnalyzer(CharArraySet.EMPTY_SET);
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
    for (String text : input.split("\u0000", -1)) {
      StringBuilder line = new StringBuilder();
      try (TokenStream stream = analyzer.tokenStream("text", text)) {
        CharTermAttribute term = stream.addAttribute(CharTermAttribute.class);
        stream.reset();
        while (stream.incrementToken()) {
          if (line.length() > 0) line.append('\u0001');
          line.append(term.toString());
        }
        stream.end();
      }
      out.print(line);
      out.print('\u0000');
    }
    out.flush();
  }
}
